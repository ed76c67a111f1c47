package conformance

import (
	"context"
	"fmt"
	"slices"

	"github.com/memhost/memhost/sdk"
)

// check is one named behaviour of the suite.
type check struct {
	name string
	// needs lists the capabilities the plugin must declare for the check
	// to run.
	needs []sdk.Capability
	// skip answers a reason to skip beyond capabilities, or "".
	skip func(*Suite) string
	// unopened checks start plugins themselves, or need none.
	unopened bool
	run      func(context.Context, *env) error
}

// checks is the suite, in run order: the plugin's own description first,
// then single-record behaviour, isolation, filtering, load, and restarts.
var checks = []check{
	{name: "Info", run: checkInfo},
	{name: "Manifest", unopened: true, skip: needManifest, run: checkManifest},
	{name: "UndeclaredCapabilities", skip: declaresAll, run: checkUndeclared},
	{name: "Config", unopened: true, run: checkConfig},
	{name: "RoundTrip", needs: caps(sdk.CapWrite, sdk.CapFetch), run: checkRoundTrip},
	{name: "RecallRoundTrip", needs: caps(sdk.CapWrite), run: checkRecallRoundTrip},
	{name: "IdempotentWrite", needs: caps(sdk.CapWrite), run: checkIdempotentWrite},
	{name: "BatchAllOrNothing", needs: caps(sdk.CapWrite), run: checkBatchAllOrNothing},
	{name: "RecordLimits", needs: caps(sdk.CapWrite), run: checkRecordLimits},
	{name: "LargeMessages", needs: caps(sdk.CapWrite), run: checkLargeMessages},
	{name: "BadRecords", needs: caps(sdk.CapWrite), run: checkBadRecords},
	{name: "BadRequests", run: checkBadRequests},
	{name: "RealmIsolation", needs: caps(sdk.CapWrite), run: checkRealmIsolation},
	{name: "RealmStatistics", needs: caps(sdk.CapWrite), run: checkRealmStatistics},
	{name: "ScopeIsolation", needs: caps(sdk.CapWrite), run: checkScopeIsolation},
	{name: "Supersede", needs: caps(sdk.CapWrite, sdk.CapSupersede), run: checkSupersede},
	{name: "Expiry", needs: caps(sdk.CapWrite), run: checkExpiry},
	{name: "RewriteOfDeadContent", needs: caps(sdk.CapWrite), run: checkRewriteOfDeadContent},
	{name: "RecallFilters", needs: caps(sdk.CapWrite), run: checkRecallFilters},
	{name: "BadFilters", run: checkBadFilters},
	{name: "SystemTags", needs: caps(sdk.CapWrite), run: checkSystemTags},
	{name: "TagFolding", needs: caps(sdk.CapWrite), run: checkTagFolding},
	{name: "Relevance", needs: caps(sdk.CapWrite), run: checkRelevance},
	{name: "UnicodeRecall", needs: caps(sdk.CapWrite), run: checkUnicodeRecall},
	{name: "ThreadEdges", needs: caps(sdk.CapWrite), run: checkThreadEdges},
	{name: "ThreadScopes", needs: caps(sdk.CapWrite), run: checkThreadScopes},
	{name: "Neighbours", needs: caps(sdk.CapWrite, sdk.CapNeighbours), run: checkNeighbours},
	{name: "CrowdedPlace", needs: caps(sdk.CapWrite, sdk.CapNeighbours), run: checkCrowdedPlace},
	{name: "ManifestTiers", needs: caps(sdk.CapWrite, sdk.CapManifest), run: checkManifestTiers},
	{name: "IdempotentForget", needs: caps(sdk.CapWrite, sdk.CapForget), run: checkIdempotentForget},
	{name: "Usage", needs: caps(sdk.CapWrite, sdk.CapFetch, sdk.CapUsage), run: checkUsage},
	{name: "UsageCounts", needs: caps(sdk.CapWrite, sdk.CapFetch, sdk.CapUsageCounts), run: checkUsageCounts},
	{name: "Ledger", needs: caps(sdk.CapLedger), run: checkLedger},
	{name: "Archive", needs: caps(sdk.CapArchive), run: checkArchive},
	{name: "UseCountCeiling", needs: caps(sdk.CapArchive, sdk.CapFetch, sdk.CapUsageCounts), run: checkUseCountCeiling},
	{name: "ProposalRevivesNothing", needs: caps(sdk.CapArchive, sdk.CapFetch), run: checkProposalRevivesNothing},
	{name: "ImportRetires", needs: caps(sdk.CapArchive, sdk.CapFetch), run: checkImportRetires},
	{name: "Reindex", needs: caps(sdk.CapWrite, sdk.CapReindex), run: checkReindex},
	{name: "ReindexCanceled", needs: caps(sdk.CapWrite, sdk.CapReindex), run: checkReindexCanceled},
	{name: "Vectors", needs: caps(sdk.CapWrite, sdk.CapForget, sdk.CapVectors), run: checkVectors},
	{name: "BadVectors", needs: caps(sdk.CapWrite, sdk.CapVectors), run: checkBadVectors},
	{name: "StaleVectors", needs: caps(sdk.CapWrite, sdk.CapVectors), run: checkStaleVectors},
	{name: "ConcurrentWriters", needs: caps(sdk.CapWrite), run: checkConcurrentWriters},
	{name: "Deadline", needs: caps(sdk.CapWrite), run: checkDeadline},
	{name: "Durability", needs: caps(sdk.CapWrite), run: checkDurability},
	{name: "CrashDurability", needs: caps(sdk.CapWrite), skip: needBinary, run: checkCrashDurability},
}

// knownCapabilities is every capability protocol v1 defines.
var knownCapabilities = sdk.AllCapabilities()

func caps(cs ...sdk.Capability) []sdk.Capability { return cs }

func findCheck(name string) *check {
	for i := range checks {
		if checks[i].name == name {
			return &checks[i]
		}
	}
	return nil
}

func (c *check) skipReason(s *Suite) string {
	for _, cp := range c.needs {
		if !s.info.Capabilities.Has(cp) {
			return fmt.Sprintf("plugin does not declare capability %s", cp)
		}
	}
	if c.skip != nil {
		return c.skip(s)
	}
	return ""
}

func needManifest(s *Suite) string {
	if s.target.Manifest == "" {
		return "no Target.Manifest to compare the plugin's Info with"
	}
	return ""
}

func needBinary(s *Suite) string {
	if s.target.Binary == "" {
		return "an in-process plugin cannot be killed with SIGKILL; set Target.Binary to run this check"
	}
	return ""
}

func declaresAll(s *Suite) string {
	for _, c := range knownCapabilities {
		if !s.info.Capabilities.Has(c) {
			return ""
		}
	}
	return "plugin declares every capability"
}

// missing answers the entries of want that got lacks.
func missing(want, got []string) []string {
	var out []string
	for _, w := range want {
		if !slices.Contains(got, w) {
			out = append(out, w)
		}
	}
	return out
}
