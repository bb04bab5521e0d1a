"""ODI fit settings the tests share.

A fit's compiled programs (SVI, the NUTS start and chunk) depend on the profile's static settings
(chains, warm-up, SVI steps, the kernel) and on the padded data sizes, not on how many draws it
takes. Tests that override only the draws (``num_samples``, ``own_samples``, ``ess_target``,
``max_samples``) of the default ``fast`` profile reuse the programs of every other fit with the
same number of models: in this process, and through the tests' JAX compilation cache
(tests/conftest.py) in other test processes and in the audits the tests start, whose default
profile is ``fast``. A test that lowered the warm-up or the SVI steps to save a second of
sampling paid a compile of its own instead (10–25 s each on a cold cache, on 2 cores)."""

#: the fast profile, stopped at 300 draws per chain (no ESS/R̂ extension): for tests that check
#: what a fit sees or reports, not how well it converges
SHORT_FIT = {"num_samples": 300, "ess_target": 0}
