"""An import-linter contract type for submodules of an external package (`django.db`).

import-linter's graph keeps an external package as one node (`django`), so its own `forbidden`
contract can forbid all of Django but not `django.db` alone. This contract reads the import
statements behind each edge into the external package instead. Registered in pyproject.toml
(`contract_types`); `make lint` runs it with the others.
"""

from __future__ import annotations

import re

from grimp import ImportGraph
from importlinter.application import output
from importlinter.domain import fields
from importlinter.domain.contract import Contract, ContractCheck


def imports_submodule(statement: str, dotted: str) -> bool:
    """Whether an import statement imports `dotted` (or something inside it)."""
    package, _, last = dotted.rpartition(".")
    name = re.escape(dotted)
    patterns = [
        rf"^\s*import\s+(.*,\s*)?{name}(\.|\s|,|$)",
        rf"^\s*from\s+{name}(\.|\s)",
    ]
    if package:
        patterns.append(rf"^\s*from\s+{re.escape(package)}\s+import\s+.*\b{re.escape(last)}\b")
    return any(re.search(pattern, statement) for pattern in patterns)


class ForbiddenSubmodulesContract(Contract):
    """Source modules (and their descendants) must not import these submodules of externals.

    Options: `source_modules`, `forbidden_modules` (e.g. `django.db`) and `ignore_imports`
    (`importer -> forbidden`, exact module names).
    """

    type_name = "forbidden_submodules"

    source_modules = fields.ListField(subfield=fields.ModuleField())
    forbidden_modules = fields.ListField(subfield=fields.StringField())
    ignore_imports = fields.ListField(subfield=fields.StringField(), required=False, default=[])

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        ignored = {tuple(part.strip() for part in i.split("->")) for i in self.ignore_imports}
        violations = []
        for source in self.source_modules:
            importers = {source.name} | graph.find_descendants(source.name)
            for importer in sorted(importers):
                for imported in sorted(graph.find_modules_directly_imported_by(importer)):
                    details = graph.get_import_details(importer=importer, imported=imported)
                    for detail in details:
                        for forbidden in self.forbidden_modules:
                            if (importer, forbidden) in ignored:
                                continue
                            if imports_submodule(detail["line_contents"], forbidden):
                                violations.append(
                                    f"{importer} -> {forbidden} (l.{detail['line_number']}: "
                                    f"{detail['line_contents'].strip()})"
                                )
        return ContractCheck(kept=not violations, metadata={"violations": violations})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for violation in check.metadata["violations"]:
            output.print_error(f"- {violation}", bold=False)
        output.new_line()
