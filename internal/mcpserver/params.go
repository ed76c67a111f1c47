package mcpserver

import (
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"

	"github.com/memhost/memhost/sdk"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// paramTypes are the params the SDK decodes each method's into.
var paramTypes = map[string]reflect.Type{
	"initialize":               reflect.TypeFor[mcp.InitializeParams](),
	"ping":                     reflect.TypeFor[mcp.PingParams](),
	"tools/list":               reflect.TypeFor[mcp.ListToolsParams](),
	"tools/call":               reflect.TypeFor[mcp.CallToolParamsRaw](),
	"prompts/list":             reflect.TypeFor[mcp.ListPromptsParams](),
	"prompts/get":              reflect.TypeFor[mcp.GetPromptParams](),
	"resources/list":           reflect.TypeFor[mcp.ListResourcesParams](),
	"resources/templates/list": reflect.TypeFor[mcp.ListResourceTemplatesParams](),
	"resources/read":           reflect.TypeFor[mcp.ReadResourceParams](),
	//lint:ignore SA1019 the SDK still serves logging/setLevel to clients of the protocols before 2026-07-28
	"logging/setLevel":          reflect.TypeFor[mcp.SetLoggingLevelParams](),
	"notifications/cancelled":   reflect.TypeFor[mcp.CancelledParams](),
	"notifications/initialized": reflect.TypeFor[mcp.InitializedParams](),
}

// CheckParams refuses params of method whose member is of another JSON
// kind than the method takes ("params.cursor: must be a string"), which
// the SDK refuses in the words of its Go types, quoting the params whole.
// Names are matched exactly, as the SDK matches them; a member the SDK
// ignores, or decodes itself, is let through.
func CheckParams(method string, params json.RawMessage) error {
	var tree any
	if _, ok := paramTypes[method]; !ok || json.Unmarshal(params, &tree) != nil {
		return nil
	}
	return CheckParamsValue(method, tree)
}

// CheckParamsValue is CheckParams of params already decoded.
func CheckParamsValue(method string, params any) error {
	t, ok := paramTypes[method]
	if !ok {
		return nil
	}
	return wrongKind(t, params, "params")
}

var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

// wrongKind refuses the first value of tree (decoded JSON) at path whose
// kind t cannot hold. A null is let through: the SDK reads it as absent.
func wrongKind(t reflect.Type, tree any, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if tree == nil || t.Kind() == reflect.Interface || reflect.PointerTo(t).Implements(unmarshaler) {
		return nil
	}
	var want string
	switch t.Kind() {
	case reflect.String:
		if _, ok := tree.(string); !ok {
			want = "a string"
		}
	case reflect.Bool:
		if _, ok := tree.(bool); !ok {
			want = "a boolean"
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		if _, ok := tree.(float64); !ok {
			want = "a number"
		}
	case reflect.Slice, reflect.Array:
		list, ok := tree.([]any)
		if !ok {
			want = "a list"
			break
		}
		for i, v := range list {
			if err := wrongKind(t.Elem(), v, path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	case reflect.Map:
		obj, ok := tree.(map[string]any)
		if !ok {
			want = "an object"
			break
		}
		// The names are the client's: the refusal does not quote them.
		for _, v := range obj {
			var fe *sdk.FieldError
			if err := wrongKind(t.Elem(), v, path); errors.As(err, &fe) {
				return &sdk.FieldError{Field: path, Problem: "each value " + fe.Problem, Err: sdk.ErrInvalid}
			}
		}
	case reflect.Struct:
		obj, ok := tree.(map[string]any)
		if !ok {
			want = "an object"
			break
		}
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if f.Anonymous && name == "" {
				// Its members are the params' own.
				if err := wrongKind(f.Type, tree, path); err != nil {
					return err
				}
				continue
			}
			if !f.IsExported() || name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if v, has := obj[name]; has {
				if err := wrongKind(f.Type, v, path+"."+name); err != nil {
					return err
				}
			}
		}
	}
	if want != "" {
		return &sdk.FieldError{Field: path, Problem: "must be " + want, Err: sdk.ErrInvalid}
	}
	return nil
}
