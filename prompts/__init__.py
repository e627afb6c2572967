"""margin prompts: one plain-text template per agent role."""
