//go:build !unix

package strictjson

import "time"

func processCPU() time.Duration { return 0 }
