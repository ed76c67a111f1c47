package pluginv1_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/bufbuild/protocompile"
	"github.com/memhost/memhost/sdk/internal/pluginpb"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"
)

var updateSnapshot = flag.Bool("update-snapshot", false, "after a compatible change, record plugin.proto as the new snapshot")

const snapshotPath = "testdata/plugin.v1.descriptor.json"

// compileProto compiles plugin.proto itself, not the generated code, so an
// edit is judged before anyone runs `make proto`.
func compileProto(t *testing.T) *descriptorpb.FileDescriptorProto {
	t.Helper()
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: []string{"../../.."}})}
	files, err := c.Compile(context.Background(), "memhost/plugin/v1/plugin.proto")
	if err != nil {
		t.Fatalf("compile plugin.proto: %v", err)
	}
	return normalize(protodesc.ToFileDescriptorProto(files[0]))
}

// normalize drops what does not matter to compatibility (comments and
// source positions).
func normalize(fd *descriptorpb.FileDescriptorProto) *descriptorpb.FileDescriptorProto {
	fd = proto.Clone(fd).(*descriptorpb.FileDescriptorProto)
	fd.SourceCodeInfo = nil
	return fd
}

func readSnapshot(t *testing.T) *descriptorpb.FileDescriptorProto {
	t.Helper()
	data, err := os.ReadFile(snapshotPath)
	if err != nil {
		t.Fatalf("read snapshot: %v", err)
	}
	var fd descriptorpb.FileDescriptorProto
	if err := protojson.Unmarshal(data, &fd); err != nil {
		t.Fatalf("parse snapshot: %v", err)
	}
	return &fd
}

// TestProtoCompatible fails on a change that breaks plugins built against
// the snapshot: a message, field, enum value or RPC removed, a field
// renumbered or retyped, an RPC's messages or streaming changed. Additions
// pass; record them with -update-snapshot.
func TestProtoCompatible(t *testing.T) {
	cur := compileProto(t)
	if breaks := Breaking(readSnapshot(t), cur); len(breaks) > 0 {
		t.Fatalf("plugin.proto breaks memhost.plugin.v1 (a shipped plugin would stop working); add, never remove or change:\n  %s",
			strings.Join(breaks, "\n  "))
	}
	if *updateSnapshot {
		data, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(cur)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(snapshotPath, append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestGeneratedCodeIsFresh: the generated Go descriptor is plugin.proto's,
// so nobody forgot `make proto`.
func TestGeneratedCodeIsFresh(t *testing.T) {
	gen := normalize(protodesc.ToFileDescriptorProto(pluginpb.File_memhost_plugin_v1_plugin_proto))
	if !proto.Equal(gen, compileProto(t)) {
		t.Fatal("the generated code does not match plugin.proto: run make proto")
	}
}

// TestBreakingDetects holds Breaking to its rules on hand-made edits.
func TestBreakingDetects(t *testing.T) {
	base := readSnapshot(t)
	edit := func(f func(*descriptorpb.FileDescriptorProto)) *descriptorpb.FileDescriptorProto {
		fd := proto.Clone(base).(*descriptorpb.FileDescriptorProto)
		f(fd)
		return fd
	}
	msg := func(fd *descriptorpb.FileDescriptorProto, name string) *descriptorpb.DescriptorProto {
		for _, m := range fd.MessageType {
			if m.GetName() == name {
				return m
			}
		}
		t.Fatalf("no message %s", name)
		return nil
	}
	for _, tc := range []struct {
		name string
		edit func(*descriptorpb.FileDescriptorProto)
		want string // "" means compatible
	}{
		{"unchanged", func(*descriptorpb.FileDescriptorProto) {}, ""},
		{"field added", func(fd *descriptorpb.FileDescriptorProto) {
			m := msg(fd, "RecallRequest")
			m.Field = append(m.Field, &descriptorpb.FieldDescriptorProto{Name: proto.String("cursor"), Number: proto.Int32(99),
				Type: descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum(), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()})
		}, ""},
		{"field removed", func(fd *descriptorpb.FileDescriptorProto) {
			m := msg(fd, "RecallRequest")
			m.Field = m.Field[1:]
		}, "RecallRequest field 1 (realm) removed"},
		{"field renumbered", func(fd *descriptorpb.FileDescriptorProto) {
			msg(fd, "RecallRequest").Field[0].Number = proto.Int32(42)
		}, "RecallRequest field realm renumbered from 1 to 42"},
		{"field retyped", func(fd *descriptorpb.FileDescriptorProto) {
			msg(fd, "RecallRequest").Field[3].Type = descriptorpb.FieldDescriptorProto_TYPE_INT64.Enum()
		}, "RecallRequest field 4 (limit) changed type"},
		{"rpc removed", func(fd *descriptorpb.FileDescriptorProto) {
			fd.Service[1].Method = fd.Service[1].Method[1:]
		}, "Provider.Recall removed"},
		{"message removed", func(fd *descriptorpb.FileDescriptorProto) {
			fd.MessageType = fd.MessageType[1:]
		}, "message InfoRequest removed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Join(Breaking(base, edit(tc.edit)), "; ")
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Fatalf("Breaking = %q, want %q", got, tc.want)
			}
		})
	}
}

// Breaking lists every change from old to cur that breaks wire
// compatibility for code generated from old.
func Breaking(old, cur *descriptorpb.FileDescriptorProto) []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	curMsgs := messages(cur.MessageType, "")
	for name, om := range messages(old.MessageType, "") {
		cm, ok := curMsgs[name]
		if !ok {
			add("message %s removed", name)
			continue
		}
		byNum := map[int32]*descriptorpb.FieldDescriptorProto{}
		byName := map[string]*descriptorpb.FieldDescriptorProto{}
		for _, f := range cm.Field {
			byNum[f.GetNumber()], byName[f.GetName()] = f, f
		}
		for _, of := range om.Field {
			if nf, ok := byName[of.GetName()]; ok && nf.GetNumber() != of.GetNumber() {
				add("%s field %s renumbered from %d to %d", name, of.GetName(), of.GetNumber(), nf.GetNumber())
				continue
			}
			cf, ok := byNum[of.GetNumber()]
			if !ok {
				if !reserved(cm, of) {
					add("%s field %d (%s) removed without reserving its number and name", name, of.GetNumber(), of.GetName())
				}
				continue
			}
			if cf.GetType() != of.GetType() || cf.GetTypeName() != of.GetTypeName() || cf.GetLabel() != of.GetLabel() {
				add("%s field %d (%s) changed type from %s %s%s to %s %s%s", name, of.GetNumber(), of.GetName(),
					of.GetLabel(), of.GetType(), of.GetTypeName(), cf.GetLabel(), cf.GetType(), cf.GetTypeName())
			}
		}
	}
	curEnums := enums(cur)
	for name, oe := range enums(old) {
		ce, ok := curEnums[name]
		if !ok {
			add("enum %s removed", name)
			continue
		}
		nums := map[int32]bool{}
		for _, v := range ce.Value {
			nums[v.GetNumber()] = true
		}
		for _, v := range oe.Value {
			if !nums[v.GetNumber()] {
				add("enum %s value %d (%s) removed", name, v.GetNumber(), v.GetName())
			}
		}
	}
	curRPCs := map[string]*descriptorpb.MethodDescriptorProto{}
	for _, s := range cur.Service {
		for _, m := range s.Method {
			curRPCs[s.GetName()+"."+m.GetName()] = m
		}
	}
	for _, s := range old.Service {
		for _, om := range s.Method {
			name := s.GetName() + "." + om.GetName()
			cm, ok := curRPCs[name]
			switch {
			case !ok:
				add("%s removed", name)
			case cm.GetInputType() != om.GetInputType() || cm.GetOutputType() != om.GetOutputType():
				add("%s changed messages from %s -> %s to %s -> %s", name, om.GetInputType(), om.GetOutputType(), cm.GetInputType(), cm.GetOutputType())
			case cm.GetClientStreaming() != om.GetClientStreaming() || cm.GetServerStreaming() != om.GetServerStreaming():
				add("%s changed streaming", name)
			}
		}
	}
	return out
}

func reserved(m *descriptorpb.DescriptorProto, f *descriptorpb.FieldDescriptorProto) bool {
	num := false
	for _, r := range m.ReservedRange {
		if f.GetNumber() >= r.GetStart() && f.GetNumber() < r.GetEnd() {
			num = true
		}
	}
	for _, n := range m.ReservedName {
		if n == f.GetName() {
			return num
		}
	}
	return false
}

func messages(ms []*descriptorpb.DescriptorProto, prefix string) map[string]*descriptorpb.DescriptorProto {
	out := map[string]*descriptorpb.DescriptorProto{}
	for _, m := range ms {
		name := prefix + m.GetName()
		out[name] = m
		for k, v := range messages(m.NestedType, name+".") {
			out[k] = v
		}
	}
	return out
}

func enums(fd *descriptorpb.FileDescriptorProto) map[string]*descriptorpb.EnumDescriptorProto {
	out := map[string]*descriptorpb.EnumDescriptorProto{}
	for _, e := range fd.EnumType {
		out[e.GetName()] = e
	}
	for name, m := range messages(fd.MessageType, "") {
		for _, e := range m.EnumType {
			out[name+"."+e.GetName()] = e
		}
	}
	return out
}
