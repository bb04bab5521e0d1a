"""The suite API's former path: a suite written against ``flipgate.suite_api`` keeps working.
The module is :mod:`flipgate.suite.api`; this name is bound to that same module object."""

import sys
from typing import TYPE_CHECKING

from flipgate.suite import api

if TYPE_CHECKING:
    from flipgate.suite.api import *  # noqa: F403  (what a type checker sees here)

sys.modules[__name__] = api
