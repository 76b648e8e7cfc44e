package connector

import "errors"

// command runs any program as the agent: COTAL_MCP_CONFIG names a Claude-style MCP
// configuration that starts `cotal mcp` as this agent, and the COTAL_* identity variables
// are set too. The persona prompt, when there is one, is a file named by
// COTAL_SYSTEM_PROMPT_FILE; --prompt and --model reach it as COTAL_PROMPT and COTAL_MODEL.
func command() Connector {
	return Connector{Name: "command", Install: "install the program, or name it by its path", Build: buildCommand}
}

func buildCommand(l Launch) (Spec, error) {
	if err := l.check(); err != nil {
		return Spec{}, err
	}
	if len(l.Args) == 0 || l.Args[0] == "" {
		return Spec{}, errors.New("--agent command needs the program to run after --, e.g. cotal spawn --agent command --name bot -- ./my-agent --flag")
	}
	cfg, err := l.mcpConfigFile("command")
	if err != nil {
		return Spec{}, err
	}
	s := Spec{Command: l.Args[0], Args: append([]string(nil), l.Args[1:]...), Env: l.MCPEnv("command"), Files: []File{cfg}}
	s.Env[EnvMCPConfig] = cfg.Path
	if pf := l.promptFile(); pf != nil {
		s.Files = append(s.Files, *pf)
		s.Env["COTAL_SYSTEM_PROMPT_FILE"] = pf.Path
	}
	if l.HasPrompt {
		s.Env["COTAL_PROMPT"] = l.Prompt
	}
	if l.Model != "" {
		s.Env["COTAL_MODEL"] = l.Model
	}
	return s, nil
}
