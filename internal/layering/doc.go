// Package layering holds, in its test, the rule that memhost's packages
// depend downward only: cmd → internal/* → coordinator, guide → sdk, and
// plugins on the SDK module alone. It has no code of its own.
package layering
