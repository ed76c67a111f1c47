package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/memhost/memhost/internal/bench"
)

// defaultLongMemEval is the LongMemEval-S development split bench reads
// unless told otherwise: beside the repository, as the data set is not
// committed into it (its README says so). Like --locomo, a relative path
// is taken from the working directory, the repository root in make.
const defaultLongMemEval = "../shared/data/longmemeval/longmemeval_s_dev.jsonl.gz"

// longMemEvalSource says where the LongMemEval file comes from.
const longMemEvalSource = "the LongMemEval-S development split (longmemeval_s_dev.jsonl.gz, MIT); pass its path with --longmemeval"

// quickLongMemEval is how many questions --quick keeps.
const quickLongMemEval = 3

// loadLongMemEval answers the questions to run; none, with a line on
// progress and missing set, when the file is absent (only the default
// path may be: a path given is checked).
func loadLongMemEval(o benchOptions, progress io.Writer) (qs []bench.LongMemEval, missing bool, err error) {
	if o.longMemEval == "" {
		return nil, false, nil
	}
	all, err := bench.LoadLongMemEval(o.longMemEval)
	switch {
	case errors.Is(err, os.ErrNotExist):
		fmt.Fprintf(progress, "bench: no LongMemEval file at %s; skipping it (%s)\n", o.longMemEval, longMemEvalSource)
		return nil, true, nil
	case err != nil:
		return nil, false, err
	}
	if o.lmeQuestions > 0 && o.lmeQuestions < len(all) {
		all = all[:o.lmeQuestions]
	}
	return all, false, nil
}

// benchLongMemEval scores one provider on the questions in a fresh host.
func benchLongMemEval(ctx context.Context, o benchOptions, p, label string, questions []bench.LongMemEval, progress io.Writer) (res []bench.LMEScore, err error) {
	err = inFreshHost(ctx, o, p, func(b *benchHost) (err error) {
		res, err = bench.EvaluateLongMemEval(ctx, b, questions, progressLine(progress, label+" LongMemEval questions"))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%s LongMemEval: %w", label, err)
	}
	return res, nil
}

// writeLongMemEval renders the LongMemEval block of the report.
func writeLongMemEval(w io.Writer, results map[string][]bench.LMEScore) {
	if len(results) == 0 {
		return
	}
	fmt.Fprintf(w, "\n## LongMemEval-S retrieval\n\nOne record per turn, user and assistant alike (thread = session); abstention questions left out; sessions ranked by their best turn; NDCG@10 with the standard discount 1/log2(rank+1), and with LongMemEval's own (1 for ranks 1 and 2, then 1/log2(rank)). The paper's retrieval figures index user turns only: these are not comparable with them. %s\n\n", evidenceNote)
	bench.WriteLMETable(w, results)
}
