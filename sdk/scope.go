package sdk

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/memhost/memhost/sdk/internal/wire"
)

// Scope names who a record belongs to inside a realm: "identity:<id>",
// "mob:<name>", "operator:<name>" or "realm".
type Scope string

// ScopeClass is the part of a scope before the colon.
type ScopeClass string

const (
	ScopeIdentity ScopeClass = "identity"
	ScopeMob      ScopeClass = "mob"
	ScopeOperator ScopeClass = "operator"
	ScopeRealm    ScopeClass = "realm"
)

// IdentityScope, MobScope and OperatorScope build scopes; RealmScope is the
// realm-wide scope.
func IdentityScope(id string) Scope   { return Scope("identity:" + id) }
func MobScope(name string) Scope      { return Scope("mob:" + name) }
func OperatorScope(name string) Scope { return Scope("operator:" + name) }

const RealmScope Scope = "realm"

// Parse splits the scope into its class and name (empty for realm).
func (s Scope) Parse() (ScopeClass, string, error) {
	if s == RealmScope {
		return ScopeRealm, "", nil
	}
	if s == "" {
		// A client that left the field out: say so, not that "" is malformed.
		return "", "", invalid("scope", "is required: identity:<id>, mob:<name>, operator:<name> or realm")
	}
	class, name, ok := strings.Cut(string(s), ":")
	if !ok {
		return "", "", invalid("scope", fmt.Sprintf("%q is not identity:<id>, mob:<name>, operator:<name> or realm", string(s)))
	}
	switch ScopeClass(class) {
	case ScopeIdentity, ScopeMob, ScopeOperator:
	default:
		return "", "", invalid("scope", fmt.Sprintf("unknown scope class %q in %q", class, string(s)))
	}
	if err := wire.ValidateToken(name, MaxIDBytes); err != nil {
		if strings.HasPrefix(err.Error(), strconv.Quote(name)) {
			// It quotes the name already: "name "a`b" may hold only …".
			return "", "", invalid("scope", "name "+err.Error())
		}
		return "", "", invalid("scope", fmt.Sprintf("name in %q %v", string(s), err))
	}
	return ScopeClass(class), name, nil
}

// Validate reports whether the scope is well formed.
func (s Scope) Validate() error {
	_, _, err := s.Parse()
	return err
}

// Class is the scope's class, or "" when malformed.
func (s Scope) Class() ScopeClass {
	c, _, _ := s.Parse()
	return c
}

// Identity is an agent identity: the realm it lives in and its id there.
type Identity struct {
	Realm string `json:"realm"`
	ID    string `json:"id"`
}

// Validate checks both parts are safe tokens.
func (id Identity) Validate() error {
	if err := ValidateRealm(id.Realm); err != nil {
		return err
	}
	if err := wire.ValidateToken(id.ID, MaxIDBytes); err != nil {
		return invalid("identity.id", err.Error())
	}
	return nil
}

// Scope is the identity's own scope.
func (id Identity) Scope() Scope { return IdentityScope(id.ID) }
