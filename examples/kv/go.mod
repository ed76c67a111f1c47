module example.com/kv

go 1.26.0

require github.com/memhost/memhost/sdk v0.0.0

// Builds against the SDK in this repository (the go.work at its root does
// the same). A provider kept elsewhere requires a tagged SDK release
// (go get github.com/memhost/memhost/sdk@vX.Y.Z) and drops this line.
replace github.com/memhost/memhost/sdk => ../../sdk
