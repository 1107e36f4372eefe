"""Templates: Template.list/get/delete/import_archive, sbx.snapshot and
Sandbox.create(template=...).

The unit tests check request shapes, name escaping and error mapping
against a canned server; the test marked live makes a template from a
real sandbox and starts another sandbox from it.
"""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from cannedserver import CannedServer
from conftest import SMALL

import withruntime
from withruntime import APIError, Sandbox, Template, TemplateDefaults, TemplateInfo

NOW = "2026-01-02T03:04:05.123456789Z"


def tpl(name: str, tag: str = "latest", **kw: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"id": "tpl_00000000000000aa", "name": name, "tag": tag, "source": "snapshot",
                         "base": "default", "layers": 1, "size_bytes": 4096, "defaults": {},
                         "created_at": NOW, "state": "ready"}
    d.update(kw)
    return d


@pytest.fixture
def canned(monkeypatch: pytest.MonkeyPatch) -> Iterator[CannedServer]:
    srv = CannedServer()
    monkeypatch.setenv("WITHRUNTIME_BASE_URL", srv.base_url)
    monkeypatch.setenv("WITHRUNTIME_API_KEY", "test-key")
    try:
        yield srv
    finally:
        srv.stop()


def test_list_get_delete(canned: CannedServer) -> None:
    full = tpl("myteam/app", "v1", source="oci", base="", layers=3, size_bytes=10 << 20, public=True,
               defaults={"env": {"A": "1"}, "workdir": "/app", "user": "app", "vcpus": 1, "memory_mib": 1024,
                         "start_cmd": "python3 -m http.server", "ready_cmd": "curl -sf localhost:8000",
                         "ready_timeout_seconds": 30},
               newer_field="kept in raw")
    canned.answer("GET", "/v1/templates", 200, {"templates": [tpl("app"), full]})
    canned.answer("GET", "/v1/templates/myteam%2Fapp:v1", 200, full)
    canned.answer("DELETE", "/v1/templates/app", 200, tpl("app", state="deleting"))

    got = Template.list()
    assert [t.ref for t in got] == ["app:latest", "myteam/app:v1"], f"got {got}"

    one = Template.get("myteam/app:v1")
    want = TemplateInfo(
        id="tpl_00000000000000aa", name="myteam/app", tag="v1", source="oci", base="", layers=3,
        size_bytes=10 << 20,
        defaults=TemplateDefaults(env={"A": "1"}, workdir="/app", user="app", vcpus=1, memory_mib=1024,
                                  start_cmd="python3 -m http.server", ready_cmd="curl -sf localhost:8000",
                                  ready_timeout_seconds=30),
        created_at=datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=timezone.utc), state="ready", public=True,
    )
    assert one == want, f"got {one}, want {want}"
    assert one.raw["newer_field"] == "kept in raw"

    gone = Template.delete("app")
    assert gone.state == "deleting", f"got {gone}"

    with pytest.raises(APIError) as e:
        Template.get("nope")
    assert e.value.code == "not_found" and e.value.status == 404

    sent = [(s.method, s.path, s.headers.get("authorization")) for s in canned.sent]
    assert sent == [
        ("GET", "/v1/templates", "Bearer test-key"),
        ("GET", "/v1/templates/myteam%2Fapp:v1", "Bearer test-key"),
        ("DELETE", "/v1/templates/app", "Bearer test-key"),
        ("GET", "/v1/templates/nope", "Bearer test-key"),
    ], f"got {sent}"


def test_names_stay_in_their_route(canned: CannedServer) -> None:
    for name, path in [("a b", "/v1/templates/a%20b"), ("a?b", "/v1/templates/a%3Fb"),
                       ("t/a#b:v1", "/v1/templates/t%2Fa%23b:v1"), ("t/a%2Fb", "/v1/templates/t%2Fa%252Fb")]:
        with pytest.raises(APIError):
            Template.get(name)  # the canned server knows no such route: not_found
        assert canned.sent[-1].path == path, f"{name!r}: sent {canned.sent[-1].path}, want {path}"
    before = len(canned.sent)
    for bad in ["", "/", "/app", "app/", "t//app", "..", "../secrets/K", "t/..", "./app"]:
        for call in (Template.get, Template.delete):
            with pytest.raises(APIError) as e:
                call(bad)
            assert e.value.code == "invalid_request", f"{bad!r}: got {e.value}"
    with pytest.raises(APIError) as e:
        Sandbox("sbx_a").snapshot("")
    assert e.value.code == "invalid_request"
    with pytest.raises(APIError) as e:
        Template.import_archive("", io.BytesIO(b"x"))
    assert e.value.code == "invalid_request"
    assert len(canned.sent) == before, f"refused names were sent: {canned.sent[before:]}"


def test_import_archive(canned: CannedServer, tmp_path: Path) -> None:
    canned.answer("POST", "/v1/templates/import", 201, tpl("myteam/app", "v1", source="oci"))
    archive = tmp_path / "app.tar"
    data = b"image:" + bytes(range(256)) * 12_000  # more than one chunk of the SDK's reads
    archive.write_bytes(data)

    got = Template.import_archive("myteam/app:v1", archive)
    assert got.ref == "myteam/app:v1" and got.source == "oci", f"got {got}"
    Template.import_archive("piped", io.BytesIO(b"image:from a file object"))
    Template.import_archive("str-path", str(archive))

    sent = canned.sent
    assert [s.query for s in sent] == [{"name": ["myteam/app:v1"]}, {"name": ["piped"]}, {"name": ["str-path"]}]
    assert sent[0].body == data and sent[0].headers["content-length"] == str(len(data))
    assert sent[0].headers["content-type"] == "application/x-tar"
    assert sent[1].body == b"image:from a file object"
    assert sent[2].body == data

    canned.error("POST", "/v1/templates/import", 400, "invalid_request", "the body is not an image archive")
    with pytest.raises(APIError) as e:
        Template.import_archive("bad", io.BytesIO(b"not an image"))
    assert e.value.code == "invalid_request" and "not an image" in e.value.message
    with pytest.raises(FileNotFoundError):
        Template.import_archive("missing", tmp_path / "missing.tar")


def test_snapshot_and_create_from_template(canned: CannedServer) -> None:
    sbx_json = {"id": "sbx_a", "state": "running", "template": "myteam/app:v1", "image": "myteam/app:v1"}
    canned.answer("POST", "/v1/sandboxes", 201, sbx_json)
    canned.answer("POST", "/v1/sandboxes/sbx_a/snapshot", 201, tpl("snap", "v2"))

    sbx = Sandbox.create(template="myteam/app:v1")
    Sandbox.create(image="default")
    got = sbx.snapshot("snap:v2")
    assert isinstance(got, TemplateInfo) and got.ref == "snap:v2" and got.source == "snapshot", f"got {got}"

    bodies = [s.json() for s in canned.sent]
    assert bodies == [{"template": "myteam/app:v1"}, {"image": "default"}, {"template": "snap:v2"}], f"got {bodies}"
    assert withruntime.SandboxInfo.from_json(sbx_json).template == "myteam/app:v1"
    # A server older than templates names it only as image.
    assert withruntime.SandboxInfo.from_json({"id": "x", "state": "running", "image": "default"}).template == "default"

    canned.error("POST", "/v1/sandboxes", 404, "not_found", "no template nope")
    with pytest.raises(APIError) as e:
        Sandbox.create(template="nope")
    assert e.value.code == "not_found"


@pytest.mark.live
def test_snapshot_then_sandbox_from_it(live_server: dict[str, str]) -> None:
    name = f"sdk-python-{uuid.uuid4().hex[:8]}:v1"
    with Sandbox.create(timeout_seconds=600, metadata={"test": "sdk-python"}, **SMALL, **live_server) as sbx:
        sbx.exec("mkdir -p /workspace/tpl && echo made-in-the-source > /workspace/tpl/mark", check=True)
        made = sbx.snapshot(name)
        # The source keeps running.
        assert sbx.exec("cat /workspace/tpl/mark", check=True).stdout == "made-in-the-source\n"
    try:
        assert made.ref == name and made.source == "snapshot" and made.id.startswith("tpl_"), f"got {made}"
        assert name in [t.ref for t in Template.list(**live_server)]
        assert Template.get(name, **live_server).id == made.id
        with Sandbox.create(template=name, timeout_seconds=600, metadata={"test": "sdk-python"},
                            **SMALL, **live_server) as child:
            assert child.info().template == name
            assert child.exec("cat /workspace/tpl/mark", check=True).stdout == "made-in-the-source\n"
    finally:
        Template.delete(name, **live_server)
    with pytest.raises(APIError) as e:
        Template.get(name, **live_server)
    assert e.value.code == "not_found"
    with pytest.raises(APIError) as e:
        Sandbox.create(template=name, **SMALL, **live_server)
    assert e.value.code == "not_found"


def _tar(files: dict[str, bytes]) -> bytes:
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for name, data in files.items():
            ti = tarfile.TarInfo(name)
            ti.size, ti.mode = len(data), 0o644
            tf.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def _docker_save(files: dict[str, bytes], env: list[str]) -> bytes:
    """What ``docker save`` writes for an image of one layer holding files."""
    import hashlib
    import json

    layer = _tar(files)
    diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
    config = json.dumps({"architecture": "amd64", "os": "linux", "config": {"Env": env},
                         "rootfs": {"type": "layers", "diff_ids": [diff_id]}}).encode()
    config_name = hashlib.sha256(config).hexdigest() + ".json"
    layer_name = diff_id[len("sha256:"):] + "/layer.tar"
    manifest = json.dumps([{"Config": config_name, "RepoTags": ["sdk/py:latest"], "Layers": [layer_name]}]).encode()
    return _tar({config_name: config, layer_name: layer, "manifest.json": manifest})


@pytest.mark.live
def test_import_archive_then_sandbox_from_it(live_server: dict[str, str], tmp_path: Path) -> None:
    name = f"sdk-python-img-{uuid.uuid4().hex[:8]}"
    archive = tmp_path / "image.tar"
    archive.write_bytes(_docker_save({"hello.txt": b"hello from the image\n"}, ["IMPORTED=yes"]))
    made = Template.import_archive(name, archive, **live_server)
    try:
        assert made.ref == f"{name}:latest" and made.source == "oci" and made.base == "", f"got {made}"
        assert made.defaults.env.get("IMPORTED") == "yes", f"got {made.defaults}"
        # The image has no shell: its file is read through the files API.
        with Sandbox.create(template=name, timeout_seconds=600, metadata={"test": "sdk-python"},
                            **SMALL, **live_server) as sbx:
            assert sbx.files.read("/hello.txt") == "hello from the image\n"
    finally:
        Template.delete(name, **live_server)
    with pytest.raises(APIError) as e:
        Template.import_archive(f"{name}-bad", io.BytesIO(_tar({"notes.txt": b"no manifest\n"})), **live_server)
    assert e.value.code == "invalid_request", f"got {e.value}"


# -- the builder ---------------------------------------------------------------

BUILD = {"id": "bld_00000000000000b1", "template": "myteam/app:latest", "state": "queued", "steps": 3,
         "step": 0, "cached_steps": 0, "created_at": NOW}


def _ndjson(*events: dict[str, Any]) -> bytes:
    import json

    return b"".join(json.dumps(e).encode() + b"\n" for e in events)


def _answer_build(canned: CannedServer, final: dict[str, Any], events: bytes) -> None:
    canned.answer("POST", "/v1/templates", 202, BUILD)
    canned.answer("GET", "/v1/templates/builds/bld_00000000000000b1/logs", 200, events)
    canned.answer("GET", "/v1/templates/builds/bld_00000000000000b1", 200, {**BUILD, **final})


def test_builder_sends_the_spec(canned: CannedServer) -> None:
    _answer_build(canned, {"state": "succeeded", "step": 3, "result": tpl("myteam/app", source="build")}, _ndjson(
        {"time": NOW, "type": "step", "step": 1, "steps": 3, "message": "pip_install pandas==2.2.3"},
        {"time": NOW, "type": "stdout", "step": 1, "message": "Successfully installed pandas\n"},
        {"time": NOW, "type": "step", "step": 2, "steps": 3, "message": "run make", "cached": True},
        {"time": NOW, "type": "info", "message": "layer 2 stored"},
        {"time": NOW, "type": "end", "state": "succeeded", "message": "built myteam/app:latest"},
    ))
    lines: list[str] = []
    b = (Template().from_template("default")
         .apt_install(["curl", "git"]).pip_install(["pandas==2.2.3"])
         .npm_install(["typescript"], global_install=True).npm_install("left-pad")
         .run("make", user="root").run("make test")
         .env({"A": "1", "B": "two"}).workdir("/workspace/app").user("app")
         .start_cmd("python3 -m http.server 8000").ready_cmd("curl -sf localhost:8000", timeout_seconds=30))
    got = b.build("myteam/app", on_log=lines.append, network={"internet": True, "allow": ["pypi.example"]},
                  no_cache=True)
    assert isinstance(got, TemplateInfo) and got.ref == "myteam/app:latest" and got.source == "build", f"got {got}"
    assert lines == ["step 1/3: pip_install pandas==2.2.3", "Successfully installed pandas",
                     "step 2/3: run make (cached)", "layer 2 stored", "built myteam/app:latest"], f"got {lines}"

    sent = canned.sent
    assert [(s.method, s.path) for s in sent] == [
        ("POST", "/v1/templates"), ("GET", "/v1/templates/builds/bld_00000000000000b1/logs"),
        ("GET", "/v1/templates/builds/bld_00000000000000b1")], f"got {sent}"
    assert sent[0].headers["content-type"] == "application/json"
    assert sent[0].headers["authorization"] == "Bearer test-key"
    assert sent[0].json() == {
        "name": "myteam/app",
        "from": {"template": "default"},
        "steps": [
            {"apt_install": ["curl", "git"]}, {"pip_install": ["pandas==2.2.3"]},
            {"npm_install": ["typescript"], "global": True}, {"npm_install": ["left-pad"]},
            {"run": "make", "user": "root"}, {"run": "make test"},
            {"env": {"A": "1", "B": "two"}}, {"workdir": "/workspace/app"}, {"user": "app"},
        ],
        "start_cmd": "python3 -m http.server 8000",
        "ready_cmd": "curl -sf localhost:8000",
        "ready_timeout_seconds": 30,
        "network": {"internet": True, "allow": ["pypi.example"]},
        "no_cache": True,
    }, f"got {sent[0].json()}"

    # The other bases, and a builder with nothing but a name.
    assert Template().from_image("python:3.12-slim").to_spec("x") == {"name": "x", "from": {"image": "python:3.12-slim"}}
    assert Template().to_spec("x:v2") == {"name": "x:v2"}
    df = "FROM default\nRUN echo hi\n"
    assert Template().from_dockerfile(df).start_cmd("sleep 1").to_spec("x") == {
        "name": "x", "dockerfile": df, "start_cmd": "sleep 1"}


def test_builder_from_image_sends_the_reference(canned: CannedServer) -> None:
    ref = "registry.example:5000/team/py:3.12"
    _answer_build(canned, {"state": "succeeded", "step": 1, "result": tpl("myteam/app", source="build")}, _ndjson(
        {"time": NOW, "type": "info", "message": f"pulling {ref}"},
        {"time": NOW, "type": "info", "message": "layer 1: reading"},
        {"time": NOW, "type": "step", "step": 1, "steps": 1, "message": "run make"},
        {"time": NOW, "type": "end", "state": "succeeded", "message": "built myteam/app:latest"},
    ))
    lines: list[str] = []
    got = Template().from_image(ref).run("make").build("myteam/app", on_log=lines.append)
    assert got.ref == "myteam/app:latest", f"got {got}"
    assert lines[:2] == [f"pulling {ref}", "layer 1: reading"], f"got {lines}"
    assert canned.sent[0].json() == {"name": "myteam/app", "from": {"image": ref}, "steps": [{"run": "make"}]}, \
        f"got {canned.sent[0].json()}"
    with pytest.raises(APIError) as e:
        Template().from_image("")
    assert e.value.code == "invalid_request", f"got {e.value}"


def test_builder_sends_only_what_copy_names(canned: CannedServer, tmp_path: Path) -> None:
    import json
    import os
    import tarfile

    _answer_build(canned, {"state": "succeeded", "result": tpl("myteam/app", source="build")},
                  _ndjson({"time": NOW, "type": "end", "state": "succeeded"}))
    ctx = tmp_path / "ctx"
    (ctx / "app" / "sub").mkdir(parents=True)
    (ctx / "app" / "main.py").write_text("print('hi')\n")
    (ctx / "app" / "sub" / "data.bin").write_bytes(bytes(range(256)) * 10)
    os.symlink("main.py", ctx / "app" / "link")  # sent as a link, not followed
    (ctx / "conf").mkdir()
    (ctx / "conf" / "a.ini").write_text("a=1\n")
    (ctx / "not-copied.txt").write_text("stays home\n")
    (tmp_path / "secret.txt").write_text("outside\n")

    Template().copy("app/", "/workspace/app").copy("conf/a.ini", "/etc/a.ini", user="app", mode="0600") \
        .copy(Path("conf") / "a.ini", "/tmp/again/").build("myteam/app", context=ctx)

    post = canned.sent[0]
    assert post.headers["content-type"] == "application/x-tar"
    with tarfile.open(fileobj=io.BytesIO(post.body)) as tf:
        members = tf.getmembers()
        assert members[0].name == "withruntime-build.json", f"got {[m.name for m in members]}"
        spec = json.loads(tf.extractfile(members[0]).read())  # type: ignore[union-attr]
        names = {m.name.rstrip("/"): m for m in members[1:]}
        assert set(names) == {"app", "app/main.py", "app/link", "app/sub", "app/sub/data.bin", "conf",
                              "conf/a.ini"}, f"got {sorted(names)}"
        assert names["app/link"].issym() and names["app/link"].linkname == "main.py"
        assert tf.extractfile(names["app/sub/data.bin"]).read() == bytes(range(256)) * 10  # type: ignore[union-attr]
    assert spec["steps"] == [
        {"copy": {"src": "app/", "dest": "/workspace/app"}},
        {"copy": {"src": "conf/a.ini", "dest": "/etc/a.ini", "user": "app", "mode": "0600"}},
        {"copy": {"src": "conf/a.ini", "dest": "/tmp/again/"}},
    ], f"got {spec['steps']}"

    # A Dockerfile's build sends the whole context (its COPYs are not read
    # here); the file's path or its text are both taken.
    (ctx / "Dockerfile").write_text("FROM default\nCOPY app/ /opt/app/\n")
    Template().from_dockerfile(ctx / "Dockerfile").build("myteam/df", context=ctx)
    with tarfile.open(fileobj=io.BytesIO(canned.sent[-3].body)) as tf:
        members = tf.getmembers()
        spec = json.loads(tf.extractfile(members[0]).read())  # type: ignore[union-attr]
        got = sorted(m.name.rstrip("/") for m in members[1:])
    assert spec == {"name": "myteam/df", "dockerfile": "FROM default\nCOPY app/ /opt/app/\n"}, f"got {spec}"
    assert got == ["Dockerfile", "app", "app/link", "app/main.py", "app/sub", "app/sub/data.bin", "conf", "conf/a.ini",
                   "not-copied.txt"], f"got {got}"
    Template().from_dockerfile("FROM default\nRUN true\n").build("myteam/df")
    assert canned.sent[-3].headers["content-type"] == "application/json", "no context given: the spec alone"

    # Paths out of the context are refused before anything is sent.
    os.symlink(tmp_path / "secret.txt", ctx / "escape")
    os.symlink(tmp_path, ctx / "up")
    before = len(canned.sent)
    for bad in ["../secret.txt", "app/../../secret.txt", str(tmp_path / "secret.txt"), "", ".", "escape",
                "up/secret.txt", "missing.txt"]:
        with pytest.raises(APIError) as e:
            Template().copy(bad, "/x").build("myteam/app", context=ctx)
        assert e.value.code == "invalid_request", f"{bad!r}: got {e.value}"
    with pytest.raises(APIError) as e:
        Template().from_dockerfile("FROM default\n").run("true").build("x")
    assert e.value.code == "invalid_request"
    assert len(canned.sent) == before, f"refused builds were sent: {canned.sent[before:]}"


def test_builder_failed_build_raises(canned: CannedServer) -> None:
    err = {"code": "invalid_request", "message": "step 2 (run false) exited with code 1"}
    _answer_build(canned, {"state": "failed", "step": 2, "error": err}, _ndjson(
        {"time": NOW, "type": "step", "step": 1, "steps": 3, "message": "run true"},
        {"time": NOW, "type": "step", "step": 2, "steps": 3, "message": "run false"},
        {"time": NOW, "type": "end", "state": "failed", "error": err},
    ))
    lines: list[str] = []
    with pytest.raises(APIError) as e:
        Template().run("true").run("false").run("true").build("myteam/app", on_log=lines.append)
    assert e.value.code == "invalid_request" and e.value.status == 400, f"got {e.value}"
    assert "failed at step 2 of 3" in e.value.message and "exited with code 1" in e.value.message, f"got {e.value}"
    assert lines[-1] == "build failed: step 2 (run false) exited with code 1", f"got {lines}"

    # What on_log raises ends the wait and is raised as it was, an OSError too.
    def boom(line: str) -> None:
        raise OSError("on_log failed")

    with pytest.raises(OSError, match="on_log failed"):
        Template().run("true").build("myteam/app", on_log=boom)

    canned.error("POST", "/v1/templates", 429, "concurrency_limit_reached", "8 builds in flight")
    with pytest.raises(APIError) as e:
        Template().run("true").build("myteam/app")
    assert e.value.code == "concurrency_limit_reached"


@pytest.mark.live
def test_builder_then_sandbox_from_it(live_server: dict[str, str], tmp_path: Path) -> None:
    name = f"sdk-built-{uuid.uuid4().hex[:8]}"
    (tmp_path / "small.txt").write_text("copied from the context\n")
    lines: list[str] = []
    made = (Template().from_template("default")
            .run("echo built > /workspace/b.txt")
            .copy("small.txt", "/workspace/small.txt")
            .env({"X": "1"})
            .build(name, on_log=lines.append, context=tmp_path, **live_server))
    try:
        assert made.ref == f"{name}:latest" and made.source == "build", f"got {made}"
        assert made.defaults.env.get("X") == "1", f"got {made.defaults}"
        assert any(line.startswith("step 1/3: ") for line in lines), f"got {lines}"
        assert any(line.startswith("step 2/3: ") for line in lines), f"got {lines}"
        with Sandbox.create(template=name, timeout_seconds=600, metadata={"test": "sdk-python"},
                            **SMALL, **live_server) as sbx:
            r = sbx.exec("cat /workspace/b.txt /workspace/small.txt; echo X=$X", check=True)
            assert r.stdout == "built\ncopied from the context\nX=1\n", f"got {r.stdout!r}"
        # A step that fails fails the build, naming the step.
        with pytest.raises(APIError) as e:
            Template().from_template(name).run("exit 3").build(f"{name}-bad", **live_server)
        assert e.value.code == "invalid_request" and "step 1 of 1" in e.value.message, f"got {e.value}"
    finally:
        Template.delete(name, **live_server)
