package e2e

// probePy is the egress tests' client inside a sandbox: raw DNS, UDP,
// ICMP, TCP and HTTP on one connection, and a scanner that looks for a
// secret's value knowing only its public prefix and its SHA-256 (the value
// itself never enters the sandbox). It uses no proxy variable: every
// connection is direct. It prints one JSON object.
const probePy = `
import hashlib, http.client, json, os, random, socket, ssl, struct, sys, time

def qname(name):
    out = b""
    for label in name.rstrip(".").split("."):
        b = label.encode()
        out += bytes([len(b) & 0xff]) + b  # a label over 63 bytes stays malformed on purpose
    return out + b"\0"

def read_name(msg, i):
    while True:
        n = msg[i]
        if n == 0:
            return i + 1
        if n & 0xc0 == 0xc0:
            return i + 2
        i += 1 + n

def parse(msg):
    qid, flags, qd, an, ns, ar = struct.unpack(">HHHHHH", msg[:12])
    i = 12
    for _ in range(qd):
        i = read_name(msg, i) + 4
    answers = []
    for _ in range(an):
        i = read_name(msg, i)
        typ, cls, ttl, ln = struct.unpack(">HHIH", msg[i:i+10])
        i += 10
        if typ == 1 and ln == 4:
            answers.append(socket.inet_ntoa(msg[i:i+4]))
        i += ln
    return qid, flags & 0xf, answers

RCODES = {0: "NOERROR", 2: "SERVFAIL", 3: "NXDOMAIN", 5: "REFUSED"}

def dns(server, name, qtype=1, tcp=False, port=53, timeout=2.0, sock=None):
    qid = random.randrange(65536)
    q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0) + qname(name) + struct.pack(">HH", qtype, 1)
    try:
        if tcp:
            s = socket.create_connection((server, port), timeout=timeout)
            s.sendall(struct.pack(">H", len(q)) + q)
            ln = struct.unpack(">H", recv_exact(s, 2))[0]
            msg = recv_exact(s, ln)
            s.close()
        else:
            s = sock or socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.settimeout(timeout)
            s.sendto(q, (server, port))
            while True:
                msg, frm = s.recvfrom(4096)
                if msg[:2] == q[:2]:
                    break
            if sock is None:
                s.close()
        rid, rcode, answers = parse(msg)
        return {"rcode": RCODES.get(rcode, str(rcode)), "answers": answers}
    except socket.timeout:
        return {"error": "timeout"}
    except OSError as e:
        return {"error": str(e)}

def recv_exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise OSError("closed")
        b += c
    return b

def nameserver():
    for line in open("/etc/resolv.conf"):
        f = line.split()
        if len(f) >= 2 and f[0] == "nameserver":
            return f[1]

def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "nameserver":
        return {"nameserver": nameserver()}
    if cmd == "dns":
        server, name = args[0], args[1]
        opts = dict(a.split("=", 1) for a in args[2:])
        if server == "resolver":
            server = nameserver()
        return dns(server, name, qtype=int(opts.get("type", 1)), tcp=opts.get("tcp") == "1",
                   port=int(opts.get("port", 53)), timeout=float(opts.get("timeout", 2)))
    if cmd == "flood":
        count, server = int(args[0]), nameserver()
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        out = {"NOERROR": 0, "REFUSED": 0, "other": 0, "first_refused": -1, "answered_after_refusal": 0}
        for i in range(count):
            r = dns(server, "flood-%03d.wild.example.test" % i, sock=s)
            rc = r.get("rcode", "other")
            if rc not in out:
                rc = "other"
            out[rc] += 1
            if rc == "REFUSED" and out["first_refused"] < 0:
                out["first_refused"] = i
            if rc == "NOERROR" and out["first_refused"] >= 0:
                out["answered_after_refusal"] += 1
        return out
    if cmd == "udp":
        host, port = args[0], int(args[1])
        opts = dict(a.split("=", 1) for a in args[2:])
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(float(opts.get("timeout", 1)))
        try:
            s.sendto(bytes.fromhex(opts["hex"]) if "hex" in opts else b"e2e-udp", (host, port))
        except OSError as e:
            return {"sent": False, "error": str(e)}
        try:
            data, frm = s.recvfrom(4096)
            return {"sent": True, "reply": data.decode("latin-1")}
        except OSError as e:
            return {"sent": True, "error": str(e)}
    if cmd == "icmp":
        # A raw socket if the sandbox allows one, else an ICMP datagram
        # ("ping") socket: either way an echo request leaves the program.
        host, kind = args[0], "raw"
        timeout = float(args[1]) if len(args) > 1 else 1
        try:
            s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
        except OSError as e:
            raw_err, kind = str(e), "dgram"
            try:
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)
            except OSError as e:
                return {"sent": False, "error": "raw socket: " + raw_err + "; ping socket: " + str(e)}
        s.settimeout(timeout)
        body = struct.pack(">BBHHH", 8, 0, 0, 0x4242, 1) + b"e2e-icmp"
        csum = 0
        for i in range(0, len(body), 2):
            csum += (body[i] << 8) + body[i + 1]
        csum = (csum >> 16) + (csum & 0xffff)
        csum = ~(csum + (csum >> 16)) & 0xffff
        body = body[:2] + struct.pack(">H", csum) + body[4:]
        try:
            s.sendto(body, (host, 0))
        except OSError as e:
            return {"sent": False, "socket": kind, "error": str(e)}
        try:
            data, frm = s.recvfrom(4096)
            return {"sent": True, "socket": kind, "reply_from": frm[0]}
        except OSError as e:
            return {"sent": True, "socket": kind, "error": str(e)}
    if cmd == "tcp":
        host, port = args[0], int(args[1])
        opts = dict(a.split("=", 1) for a in args[2:])
        send = opts.get("send", "").encode()
        try:
            s = socket.create_connection((host, port), timeout=float(opts.get("timeout", 5)))
        except OSError as e:
            return {"connected": False, "error": str(e)}
        s.settimeout(3)
        if send:
            s.sendall(send)
        data = b""
        try:
            while len(data) < 4096:
                c = s.recv(4096)
                if not c:
                    break
                data += c
                if b"\n" in data:
                    break
        except OSError as e:
            return {"connected": True, "data": data.decode("latin-1"), "error": str(e)}
        return {"connected": True, "data": data.decode("latin-1")}
    if cmd == "http":
        # http CONNECT_HOST PORT TLS CAFILE('' for the system's) REQUESTS_JSON:
        # every request on one connection, in order. TLS: 0 plain, 1 TLS
        # offering http/1.1, 2 TLS offering h2 first.
        host, port, use_tls, cafile, reqs = args[0], int(args[1]), args[2] != "0", args[3], json.loads(args[4])
        if use_tls:
            ctx = ssl.create_default_context(cafile=cafile or None)
            ctx.set_alpn_protocols(["h2", "http/1.1"] if args[2] == "2" else ["http/1.1"])
            c = http.client.HTTPSConnection(host, port, context=ctx, timeout=10)
        else:
            c = http.client.HTTPConnection(host, port, timeout=10)
        out = []
        for r in reqs:
            # A request may wait for a file the test makes (to change the
            # policy between two requests of one connection); a response
            # may be announced by a file.
            if r.get("wait_for"):
                deadline = time.time() + 30
                while not os.path.exists(r["wait_for"]) and time.time() < deadline:
                    time.sleep(0.05)
            try:
                c.putrequest(r.get("method", "GET"), r["path"], skip_host=True, skip_accept_encoding=True)
                c.putheader("Host", r["host"])
                for k, v in r.get("headers", {}).items():
                    c.putheader(k, v)
                body = r.get("body", "").encode()
                if body:
                    c.putheader("Content-Length", str(len(body)))
                c.endheaders(body or None)
                resp = c.getresponse()
                alpn = c.sock.selected_alpn_protocol() if use_tls and c.sock else None
                out.append({"status": resp.status, "headers": dict(resp.getheaders()), "body": resp.read().decode("latin-1"), "alpn": alpn})
                if r.get("done_file"):
                    open(r["done_file"], "w").close()
            except Exception as e:
                out.append({"error": type(e).__name__ + ": " + str(e)})
                break
        return {"responses": out}
    if cmd == "pyhttps":
        # Python's requests if the image has it, else urllib: either way
        # with no certificate option, trusting what the system trusts.
        url, headers = args[0], json.loads(args[1])
        try:
            import requests
        except ImportError:
            requests = None
        if requests:
            try:
                r = requests.get(url, headers=headers, timeout=10)
                return {"lib": "requests", "status": r.status_code, "headers": dict(r.headers), "body": r.text}
            except Exception as e:
                return {"lib": "requests", "error": type(e).__name__ + ": " + str(e)}
        import urllib.request, urllib.error
        req = urllib.request.Request(url, headers=headers)
        try:
            r = urllib.request.urlopen(req, timeout=10)
            return {"lib": "urllib", "status": r.status, "headers": dict(r.getheaders()), "body": r.read().decode("latin-1")}
        except urllib.error.HTTPError as e:
            return {"lib": "urllib", "status": e.code, "body": e.read().decode("latin-1")}
        except Exception as e:
            return {"lib": "urllib", "error": type(e).__name__ + ": " + str(e)}
    if cmd == "scan":
        # scan PREFIX LENGTH SHA256[,SHA256...] DIR...
        return scan(args[0].encode(), int(args[1]), set(args[2].split(",")), args[3:])
    raise SystemExit("unknown command " + cmd)

def found(data, prefix, length, digests):
    hits = set()
    i = data.find(prefix)
    while i >= 0:
        d = hashlib.sha256(data[i:i+length]).hexdigest()
        if d in digests:
            hits.add(d)
        i = data.find(prefix, i + 1)
    return hits

def scan(prefix, length, digests, dirs):
    # hits: [digest, where] for every place a value of digests is found.
    out = {"hits": [], "files_checked": 0, "procs": 0, "mem_regions": 0, "mem_bytes": 0, "mem_errors": 0}
    def note(data, where):
        for d in sorted(found(data, prefix, length, digests)):
            out["hits"].append([d, where])
    for d in dirs:
        for root, subdirs, files in os.walk(d):
            for f in files:
                p = os.path.join(root, f)
                try:
                    if not os.path.isfile(p) or os.path.islink(p):
                        continue
                    with open(p, "rb") as fh:
                        data = fh.read(64 << 20)
                except OSError:
                    continue
                out["files_checked"] += 1
                note(data, "file:" + p)
    me = os.getpid()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        out["procs"] += 1
        for what in ("environ", "cmdline"):
            try:
                data = open("/proc/%s/%s" % (pid, what), "rb").read()
            except OSError:
                continue
            note(data, what + ":" + pid)
        if int(pid) == me:
            continue
        try:
            maps = open("/proc/%s/maps" % pid).read().splitlines()
            mem = open("/proc/%s/mem" % pid, "rb", 0)
        except OSError:
            out["mem_errors"] += 1
            continue
        seen = set()
        for line in maps:
            f = line.split()
            lo, hi = [int(x, 16) for x in f[0].split("-")]
            if "r" not in f[1] or hi - lo > (512 << 20):
                continue
            try:
                mem.seek(lo)
                data = mem.read(hi - lo)
            except (OSError, OverflowError, ValueError):
                out["mem_errors"] += 1
                continue
            out["mem_regions"] += 1
            out["mem_bytes"] += len(data)
            for d in found(data, prefix, length, digests) - seen:
                seen.add(d)
                out["hits"].append([d, "mem:" + pid])
    return out

print(json.dumps(main()))
`
