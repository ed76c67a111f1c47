// The build puts plugin.proto beside the compiled SDK, which loads it at
// run time (@grpc/proto-loader): the published .proto in sdk/proto is the
// one source, and no code is generated from it.
import { copyFileSync } from "node:fs";

copyFileSync(new URL("../../proto/memhost/plugin/v1/plugin.proto", import.meta.url), new URL("../dist/plugin.proto", import.meta.url));
