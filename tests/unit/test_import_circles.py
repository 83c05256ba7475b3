"""No module of these pairs imports the other back (issue 33): each pair shares a third module instead
(cli.api_command, worker.handler_api, bench.outcome). The registry loads the built-in handlers by name
(importlib), which the import graph does not show, so for that pair the built-ins must not reach the registry."""

from __future__ import annotations

import grimp
import pytest

PAIRS = [
    ("duetime.cli.client", "duetime.cli.limits"),
    ("bench.peer_tasks", "bench.systems"),
    ("duetime.worker.registry", "duetime.worker.demo"),
]


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("duetime", "bench", include_external_packages=False)


@pytest.mark.parametrize(("one", "other"), PAIRS)
def test_the_pair_is_no_import_circle(graph, one, other):
    both_ways = [
        chain
        for importer, imported in ((one, other), (other, one))
        if (chain := graph.find_shortest_chain(importer=importer, imported=imported)) is not None
    ]
    assert len(both_ways) < 2, f"{one} and {other} import each other: {both_ways}"


def test_the_built_in_handlers_do_not_reach_the_registry_that_loads_them(graph):
    assert graph.find_shortest_chain(importer="duetime.worker.demo", imported="duetime.worker.registry") is None


def test_no_module_imports_itself_back_as_it_is_imported():
    """No circle at all among the modules' import-time imports (a lazy import in a function, or one for the
    type checker only, runs after both modules exist, so it closes no circle)."""
    graph = grimp.build_graph("duetime", "bench", include_external_packages=False, exclude_type_checking_imports=True)
    edges = [
        (importer, imported)
        for importer in graph.modules
        for imported in graph.find_modules_directly_imported_by(importer)
    ]
    for importer, imported in edges:
        if all(detail["is_lazy"] for detail in graph.get_import_details(importer=importer, imported=imported)):
            graph.remove_import(importer=importer, imported=imported)
    circles = [
        [importer, *chain]
        for importer, imported in edges
        if graph.direct_import_exists(importer=importer, imported=imported)
        and (chain := graph.find_shortest_chain(importer=imported, imported=importer)) is not None
    ]
    assert circles == []
