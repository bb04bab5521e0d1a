"""Configuration envelope (SPEC §6–§7, SafetyRepro): spec, rendering, runner, analysis, suite cell."""
