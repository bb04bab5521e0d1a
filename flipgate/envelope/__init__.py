"""Configuration envelope (docs/definitions.md §6–§7, SafetyRepro): spec, rendering, runner,
analysis, suite cell."""
