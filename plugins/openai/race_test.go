//go:build race

package openai

func init() { raceDetector = true }
