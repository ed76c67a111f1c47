package guide

// DefaultBlockSource names a guide's block in Context.Guides.
const DefaultBlockSource = "memory"

// Context is the small slice of an agent loop's state a guide reads and
// writes: the task, the conversation so far, and the guide blocks the
// loop places in each model call's prompt.
type Context struct {
	Task    string
	History []Message
	Guides  []Block
}

// Message is one conversation message.
type Message struct {
	Role    string // "user", "assistant", "system", "tool"
	Content string
}

// Block is one guide's contribution to the prompt.
type Block struct {
	Source string
	Text   string
}

// LastUserMessage answers the content of the latest user message.
func (c *Context) LastUserMessage() (string, bool) {
	for i := len(c.History) - 1; i >= 0; i-- {
		if c.History[i].Role == "user" {
			return c.History[i].Content, true
		}
	}
	return "", false
}

// SetGuide replaces the block of source with text in place (its position
// in the prompt is kept), adds it when new, and removes it when text is
// empty.
func (c *Context) SetGuide(source, text string) {
	for i, b := range c.Guides {
		if b.Source != source {
			continue
		}
		if text == "" {
			c.Guides = append(c.Guides[:i], c.Guides[i+1:]...)
		} else {
			c.Guides[i].Text = text
		}
		return
	}
	if text != "" {
		c.Guides = append(c.Guides, Block{Source: source, Text: text})
	}
}
