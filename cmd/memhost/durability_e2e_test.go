package main

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"
)

// TestKilledProviderLosesNoAcknowledgedWrite posts records while the
// provider plugin is killed with SIGKILL at a random moment; memhost
// restarts it, and every record it acknowledged must still be there.
func TestKilledProviderLosesNoAcknowledgedWrite(t *testing.T) {
	for _, pc := range providerConfigs {
		t.Run(pc.plugin, func(t *testing.T) {
			m := startMemhost(t, providerDeployment(pc.plugin, pc.config), envFor(t, pc.env)...)
			pid := pluginPids(t, m)[0]
			type acked struct{ id, title string }
			var ok []acked
			refused := 0
			killAt := 5 + rand.IntN(30)
			for i := range 60 {
				if i == killAt {
					if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
						t.Fatal(err)
					}
				}
				title := fmt.Sprintf("durable note %d", i)
				var out struct {
					IDs []string `json:"ids"`
				}
				code := m.do("POST", "/v1/records", map[string]any{"records": []map[string]any{{
					"scope": "realm", "kind": "fact", "title": title, "body": fmt.Sprintf("body of note %d", i),
				}}}, &out)
				switch code {
				case 200:
					ok = append(ok, acked{out.IDs[0], title})
				case 503:
					refused++ // not acknowledged: the plugin died under it
				default:
					t.Fatalf("write %d: status %d\n%s", i, code, m.logs())
				}
			}
			// The plugin came back (a later write or the health loop restarted it).
			deadline := time.Now().Add(20 * time.Second)
			for {
				var p pluginsAnswer
				m.do("GET", "/v1/plugins", nil, &p)
				if p.Plugins[0].Healthy && p.Plugins[0].Pid != pid {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("plugin not restarted: %+v", p)
				}
				time.Sleep(50 * time.Millisecond)
			}
			if len(ok) < 50 {
				t.Fatalf("only %d of 60 writes acknowledged (%d refused): recovery is too slow", len(ok), refused)
			}
			for _, a := range ok {
				var rec struct {
					ID    string `json:"id"`
					Title string `json:"title"`
				}
				if code := m.do("GET", "/v1/records/"+a.id, nil, &rec); code != 200 || rec.Title != a.title {
					t.Fatalf("acknowledged record %s (%q) lost after kill -9: status %d %+v", a.id, a.title, code, rec)
				}
			}
		})
	}
}
