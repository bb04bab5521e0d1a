"""The release gate: threshold decision rules (:mod:`flipgate.gate.rules`, docs/definitions.md
§5), the sequential stop that decides a cell's thresholds on its items as they come
(:mod:`flipgate.gate.sequential`, §12), and the run's ledger of what was gated
(:mod:`flipgate.gate.ledger`, the exit status)."""
