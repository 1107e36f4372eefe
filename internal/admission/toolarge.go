package admission

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/sandbox"
)

// headerTooLargeAnswer is the whole HTTP answer to a request whose line and
// headers pass max bytes. No handler runs for it (the Listener answers),
// so it is written out here, in the API's error body: the code of a body
// that is too large, with the status HTTP has for headers.
func headerTooLargeAnswer(max int) []byte {
	d := api.ErrorDetail{
		Code:    string(sandbox.KindPayloadTooLarge),
		Message: fmt.Sprintf("request headers too large: a request's line and headers may take at most %d bytes", max),
	}
	body, _ := json.Marshal(api.ErrorBody{Error: d}) // cannot fail: strings only
	body = append(body, '\n')
	return fmt.Appendf(nil, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nX-Content-Type-Options: nosniff\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		http.StatusRequestHeaderFieldsTooLarge, http.StatusText(http.StatusRequestHeaderFieldsTooLarge), len(body), body)
}
