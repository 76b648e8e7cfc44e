package agentmcp

import (
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/cotal-ai/cotal/protocol"
)

// Bounds of the message arguments, said in every tool's input schema so an agent learns
// them before it is refused.
const (
	// MaxTextLength bounds a message's text: the broker's 1 MiB payload limit less room
	// for the envelope (ids, names, mentions) around it.
	MaxTextLength = 1<<20 - 16<<10
	// MaxMentions bounds the peers one post mentions.
	MaxMentions = 64
)

// textArg puts MaxTextLength on the text property of a tool's schema.
func textArg(p map[string]*jsonschema.Schema) { p["text"].MaxLength = maxLen(MaxTextLength) }

// checkBounds refuses a text over MaxTextLength bytes or more than MaxMentions mentions.
func checkBounds(text string, mentions []string) error {
	if len(text) > MaxTextLength {
		return fmt.Errorf("text is %d bytes: a message holds at most %d (the broker's 1 MiB payload limit less its envelope); nothing was sent, split it or share a file", len(text), MaxTextLength)
	}
	if len(mentions) > MaxMentions {
		return fmt.Errorf("%d mentions: mention at most %d peers; nothing was sent", len(mentions), MaxMentions)
	}
	return nil
}

// maxPersonaList bounds each channel or capability list of cotal_persona.
const maxPersonaList = 64

// maxPathLength bounds a path argument.
const maxPathLength = 4096

// despawnSchema, personasSchema and personaSchema bound the manager tools' strings and
// lists; the manager checks every value again.
func despawnSchema() *jsonschema.Schema {
	return toolSchema[despawnArgs](func(p map[string]*jsonschema.Schema) { p["name"].MaxLength = maxLen(protocol.MaxNameLength) })
}

func personasSchema() *jsonschema.Schema {
	return toolSchema[personasArgs](func(p map[string]*jsonschema.Schema) { p["name"].MaxLength = maxLen(protocol.MaxNameLength) })
}

func personaSchema() *jsonschema.Schema {
	return toolSchema[personaArgs](func(p map[string]*jsonschema.Schema) {
		p["name"].MaxLength = maxLen(protocol.MaxNameLength)
		p["prompt"].MaxLength = maxLen(MaxPersonaPrompt)
		p["role"].MaxLength = maxLen(protocol.MaxRoleLength)
		p["description"].MaxLength = maxLen(shownChannel)
		p["agent"].MaxLength = maxLen(shownWord)
		p["model"].MaxLength = maxLen(maxModel)
		p["announce"].MaxLength = maxLen(protocol.MaxChannelLength)
		for _, k := range []string{"subscribe", "allowSubscribe", "allowPublish"} {
			p[k].MaxItems = maxLen(maxPersonaList)
			p[k].Items.MaxLength = maxLen(protocol.MaxChannelLength)
		}
		p["capabilities"].MaxItems = maxLen(maxPersonaList)
		p["capabilities"].Items.MaxLength = maxLen(protocol.MaxNameLength)
	})
}
