package workspace

import (
	"gopkg.in/yaml.v3"

	"github.com/cotal-ai/cotal/trust"
)

// limits reads the limits block: what the space may store and what each connection may
// do (trust.Limits). Each key is optional; a key it does not set keeps the account's
// current value (a new space's: trust.DefaultLimits). Sizes read as 512MiB, 2GiB or
// unlimited; counts as whole numbers or unlimited.
func (y *yamlFile) limits(n *yaml.Node) (trust.Limits, error) {
	var l trust.Limits
	if isNull(n) {
		return l, nil
	}
	fields, err := y.known(n, "limits", trust.LimitNames())
	if err != nil {
		return l, err
	}
	for _, name := range trust.LimitNames() {
		kv := fields[name]
		if kv == nil {
			continue
		}
		v, err := y.str(kv.value, "limits."+name)
		if err != nil {
			return l, err
		}
		if err := l.Set(name, v); err != nil {
			return l, y.errAt(kv.value, "limits.%s: %w", name, err)
		}
	}
	return l, nil
}
