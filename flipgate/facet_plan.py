"""What a facet or control cell asks a model (docs/definitions.md §2–3): its items (the first N
of the seed-42 shuffle that the facet keeps), its manifest of K orderings, its plan
``[(item, condition, permutation, sample)]`` and the rendered requests. The core's: the order
suite measures these cells (flipgate.order.measure), the cost projection prices them, and a suite
from another package can ask for them (:func:`flipgate.suite.api.facet_requests`)."""

from __future__ import annotations

from pathlib import Path

from flipgate import FlipgateError
from flipgate.backends import Request
from flipgate.cell import CellKey
from flipgate.config import AuditConfig
from flipgate.facets import Facet, get_facet
from flipgate.facets.choice import ChoiceFacet
from flipgate.grammar import Manifest, item_seed
from flipgate.items import Item, load_items
from flipgate.items.item import LETTERS
from flipgate.store import TrialStore

#: a cell's plan: ``(item, condition, permutation, sample)`` per trial
PlanEntry = tuple[Item, int, tuple[int, ...], int]


class FacetPlans:
    """The plans of one process's facet and control cells, each made (and its manifest written)
    once: ``n_override`` is ``--items-per-dataset``, ``control_salt`` ``--fresh-controls``'s."""

    def __init__(
        self,
        config: AuditConfig,
        store: TrialStore,
        manifests: Path,
        n_override: int | None = None,
        control_salt: str | None = None,
    ):
        self.config = config
        self.store = store
        self.manifests = manifests
        self.n_override = n_override
        self.control_salt = control_salt
        self._items: dict[tuple[str, str], list[Item]] = {}
        self._plans: dict[tuple[str, str], list[PlanEntry]] = {}

    def items(self, dataset: str, facet_name: str) -> list[Item]:
        """The first N items of the seed-42 shuffle that the facet keeps; items a facet's screen
        (e.g. position references) excludes on the way are counted in the store. Drawn once per
        (dataset, facet) and process."""
        if (dataset, facet_name) not in self._items:
            self._items[dataset, facet_name] = self._draw_items(dataset, facet_name)
        return self._items[dataset, facet_name]

    def _draw_items(self, dataset: str, facet_name: str) -> list[Item]:
        facet = get_facet(facet_name)
        spec = self.config.dataset(dataset)
        n_items = self.config.n_items(dataset, self.n_override)
        kept, excluded = [], 0
        every = load_items(spec, None, self.config.seed)
        for item in every:
            if facet.keep(item):
                kept.append(item)
                if len(kept) == n_items:
                    break
            elif facet.screens and facet.screen(item) is not None:
                excluded += 1
        if not kept:  # a cell of no items has nothing to measure (it was a Looks ValueError)
            field = next(
                f"audit.facets.{f}.datasets[{j}]"
                for f in (facet_name, *self.config.facets)
                for j, d in enumerate(self.config.facets.get(f, ()))
                if d.name == dataset
            )
            raise FlipgateError(
                f"{self.config.path}: field {field}: dataset {dataset!r} ({spec.describe()}) "
                f"has no item facet {facet_name!r} can permute: "
                f"{_why_none_kept(facet, every, excluded)}"
            )
        if facet.screens:
            self.store.add_screen(facet_name, dataset, excluded, excluded + len(kept))
        return kept

    def manifest(self, dataset: str, facet_name: str, items: list[Item]) -> Manifest:
        facet = get_facet(facet_name)
        manifest = Manifest.build(
            facet_name,
            dataset,
            {it.item_id: facet.n_units(it) for it in items},
            self.config.k,
            self.config.seed,
        )
        path = manifest.save(self.manifests)
        self.store.add_manifest(facet_name, dataset, manifest.k, manifest.sha256, str(path))
        return manifest

    def cell_plan(self, dataset: str, name: str) -> list[PlanEntry]:
        """The plan ``[(item, condition, permutation, sample)]`` of a facet or control cell
        (manifest orderings; for a control the canonical ordering K times); made, and its
        manifest written, once per process."""
        if (dataset, name) not in self._plans:
            self._plans[dataset, name] = self._make_plan(dataset, name)
        return self._plans[dataset, name]

    def _make_plan(self, dataset: str, name: str) -> list[PlanEntry]:
        cell = CellKey.parse(name)
        facet_name = cell.facet
        facet = get_facet(facet_name)
        items = self.items(dataset, facet_name)
        if not items:
            raise FlipgateError(
                f"dataset {dataset!r} has no items that facet {facet_name!r} can permute"
            )
        k = self.config.k
        plan: list[PlanEntry] = []
        if cell.is_control:
            for it in items:
                canonical = tuple(range(facet.n_units(it)))
                plan += [(it, s, canonical, s) for s in range(k)]
        else:
            manifest = self.manifest(dataset, facet_name, items)
            for it in items:
                plan += [(it, o, perm, 0) for o, perm in enumerate(manifest.entries[it.item_id])]
        return plan

    def replicate_seed(self, item_id: str, replicate: int, n_units: int) -> int:
        """Seed of a same-ordering control's replicate: sha256 of the item, the replicate and
        the run seed (and the --fresh-controls salt)."""
        salt = f"#{self.control_salt}" if self.control_salt else ""
        return item_seed(f"{item_id}#{replicate}{salt}", n_units, self.config.k, self.config.seed)

    def cell_requests(
        self, dataset: str, name: str, items: tuple[int, int] | None = None
    ) -> tuple[list[tuple], list[Request]]:
        """A cell's plan (:meth:`cell_plan`; with ``items`` = (first, last), that of those items
        in the seeded order) and its rendered requests."""
        plan = (
            self.cell_plan(dataset, name)
            if items is None
            else self.plan_items(dataset, name, *items)
        )
        cell = CellKey.parse(name)
        facet = get_facet(cell.facet)
        requests = [
            facet.render(
                it,
                perm,
                seed=self.replicate_seed(it.item_id, s, len(perm)) if cell.is_control else 0,
                key=(dataset, it.item_id, name, o, s),
            )
            for it, o, perm, s in plan
        ]
        return plan, requests

    def plan_items(self, dataset: str, name: str, first: int, last: int) -> list[PlanEntry]:
        """The entries of a cell's plan (:meth:`cell_plan`) for its items ``first`` to ``last``
        (exclusive) in the seeded order."""
        wanted = {it.item_id for it in self.items(dataset, CellKey.parse(name).facet)[first:last]}
        return [entry for entry in self.cell_plan(dataset, name) if entry[0].item_id in wanted]


def _why_none_kept(facet: Facet, items: list[Item], excluded: int) -> str:
    """Why ``facet``'s filter kept none of ``items`` (``excluded`` of them by its screen), as
    the user can fix it in the data: the option counts of a choice facet's items, say."""
    n = len(items)
    if facet.screens and excluded == n:
        return f"its screen excludes every one of its {n} items ({facet.screen(items[0])}, ...)"
    if isinstance(facet, ChoiceFacet):
        counts = {it.n_options for it in items}
        if max(counts) < 2:
            return f"every one of its {n} items has fewer than 2 options"
        if min(counts) > len(LETTERS):
            return (
                f"every one of its {n} items has more than {len(LETTERS)} options (one label "
                f"per letter, A to Z)"
            )
        if all(c < 2 or c > len(LETTERS) for c in counts):
            return (
                f"every one of its {n} items has fewer than 2 or more than {len(LETTERS)} options"
            )
    return f"none of its {n} items has the units that facet {facet.name!r} permutes"
