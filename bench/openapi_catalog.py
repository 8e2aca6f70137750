"""A large synthetic OpenAPI 3.1 document: N operations over namespaces, resources and actions that share words.

``synthetic_spec(1000)`` is the catalog the OpenAPI toolset is timed on, and a realistic haystack
for tool search: every operation of one resource shares its nouns, every operation of one action its
verbs, and namespaces reuse resource names (``billing`` and ``sales`` both have ``invoice``
operations), so words alone do not tell them apart. Deterministic: the same arguments give the
same document. ``facts(spec)`` lists each operation's namespace, resource and action, for labelling
queries.

    python -c "from bench.openapi_catalog import synthetic_spec; import json; print(json.dumps(synthetic_spec(1000)))"
"""

from __future__ import annotations

from typing import Any

__all__ = ("NAMESPACES", "RESOURCES", "facts", "synthetic_spec")

NAMESPACES = (
    ("billing", "money owed and paid"),
    ("sales", "deals and the orders they bring"),
    ("crm", "people and companies the business talks to"),
    ("inventory", "stock kept in warehouses"),
    ("logistics", "moving goods between places"),
    ("support", "helping customers with problems"),
    ("hr", "employees and their work"),
    ("analytics", "reports and numbers about the business"),
    ("marketing", "campaigns that reach customers"),
    ("identity", "accounts, logins and permissions"),
    ("content", "documents, pages and media"),
    ("devices", "hardware in the field"),
)
RESOURCES = (
    ("customer", "a person or company that buys"),
    ("invoice", "a bill sent for payment"),
    ("order", "a request to buy goods"),
    ("payment", "money received or sent"),
    ("shipment", "a parcel on its way"),
    ("product", "an item that is sold"),
    ("ticket", "a reported problem"),
    ("employee", "a person who works here"),
    ("report", "a summary of figures"),
    ("campaign", "a coordinated message to many people"),
    ("account", "a login with its settings"),
    ("document", "a stored file with text"),
    ("device", "a machine that sends readings"),
    ("warehouse", "a building that stores stock"),
    ("supplier", "a company that delivers goods"),
    ("contract", "a signed agreement"),
    ("refund", "money returned to a buyer"),
    ("subscription", "a recurring purchase"),
    ("note", "a short remark attached to a record"),
    ("team", "a group of employees"),
    ("role", "a set of permissions"),
    ("coupon", "a discount code"),
    ("address", "where someone lives or receives goods"),
    ("alert", "a warning raised by a rule"),
    ("schedule", "times at which something happens"),
)
# action, method, where (collection / item / action path), what it does
ACTIONS = (
    ("list", "get", "collection", "List {plural} in {ns}, newest first, filtered by status and date."),
    ("get", "get", "item", "Get one {resource} in {ns} by its id."),
    ("create", "post", "collection", "Create a new {resource} in {ns}."),
    ("update", "patch", "item", "Change some fields of a {resource} in {ns}."),
    ("replace", "put", "item", "Replace a {resource} in {ns} with a new version."),
    ("delete", "delete", "item", "Delete a {resource} from {ns} for good."),
    ("search", "get", "search", "Search {plural} in {ns} by words in their name or notes."),
    ("archive", "post", "action", "Archive a {resource} in {ns}: hidden from lists, kept for the record."),
    ("restore", "post", "action", "Restore an archived {resource} in {ns}."),
    ("export", "get", "export", "Export {plural} of {ns} as CSV rows."),
    ("count", "get", "count", "Count {plural} in {ns} matching a status."),
    ("approve", "post", "action", "Approve a pending {resource} in {ns}."),
    ("reject", "post", "action", "Reject a pending {resource} in {ns} with a reason."),
    ("assign", "post", "action", "Assign a {resource} in {ns} to an owner."),
    ("comment", "post", "action", "Add a comment to a {resource} in {ns}."),
    ("history", "get", "history", "Show the change history of a {resource} in {ns}."),
    ("duplicate", "post", "action", "Copy a {resource} in {ns} into a new draft."),
)


def _components() -> dict[str, Any]:
    return {
        "schemas": {
            "Page": {
                "type": "object",
                "properties": {"items": {"type": "array", "items": {}}, "next": {"type": ["string", "null"]}},
            },
            "Status": {"type": "string", "enum": ["draft", "pending", "active", "archived"]},
            "Record": {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string", "maxLength": 200},
                    "status": {"$ref": "#/components/schemas/Status"},
                    "owner": {"type": "string", "description": "The id of the owning employee."},
                    "notes": {"type": "string"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                },
            },
        },
        "parameters": {
            "Id": {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}},
            "Limit": {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 100}},
            "Cursor": {"name": "cursor", "in": "query", "schema": {"type": "string"}},
            "Since": {"name": "since", "in": "query", "schema": {"type": "string", "format": "date"}},
        },
        "securitySchemes": {"key": {"type": "apiKey", "in": "header", "name": "X-API-Key"}},
    }


def _operation(ns: str, ns_text: str, resource: str, resource_text: str, action: tuple[str, str, str, str]) -> Any:
    name, method, where, summary = action
    plural = resource + "s"
    ref = {"$ref": "#/components/parameters/Id"}
    op: dict[str, Any] = {
        "operationId": f"{ns}_{name}_{resource}",
        "summary": summary.format(plural=plural, resource=resource, ns=ns),
        "description": f"A {resource} is {resource_text}; {ns} is about {ns_text}.",
        "tags": [ns, resource],
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {}}}}},
    }
    if where in ("collection", "search", "export", "count"):
        op["parameters"] = [{"$ref": "#/components/parameters/Limit"}, {"$ref": "#/components/parameters/Cursor"}]
        if where == "search":
            op["parameters"].append({"name": "q", "in": "query", "required": True, "schema": {"type": "string"}})
        if where != "search":
            op["parameters"].append(
                {"name": "status", "in": "query", "schema": {"$ref": "#/components/schemas/Status"}}
            )
            op["parameters"].append({"$ref": "#/components/parameters/Since"})
    else:
        op["parameters"] = [ref]
    if method in ("post", "put", "patch") and where in ("collection", "item"):
        op["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Record"}}},
        }
    elif where == "action" and name in ("reject", "comment", "assign"):
        field = {"reject": "reason", "comment": "text", "assign": "owner"}[name]
        op["requestBody"] = {
            "required": True,
            "content": {
                "application/json": {
                    "schema": {"type": "object", "required": [field], "properties": {field: {"type": "string"}}}
                }
            },
        }
    return op


def _path(ns: str, resource: str, action: str, where: str) -> str:
    base = f"/{ns}/{resource}s"
    return {
        "collection": base,
        "item": base + "/{id}",
        "search": base + "/search",
        "export": base + "/export",
        "count": base + "/count",
        "history": base + "/{id}/history",
        "action": base + "/{id}/" + action,
    }[where]


def synthetic_spec(operations: int = 1000, *, title: str = "Synthetic enterprise API") -> dict[str, Any]:
    """An OpenAPI 3.1 document with ``operations`` operations (at most 12 x 25 x 17 = 5,100)."""
    limit = len(NAMESPACES) * len(RESOURCES) * len(ACTIONS)
    if not 0 < operations <= limit:
        raise ValueError(f"operations must be between 1 and {limit}")
    paths: dict[str, dict[str, Any]] = {}
    count = 0
    # Resources outer, namespaces inner: the first N operations spread over every namespace.
    for resource, resource_text in RESOURCES:
        for ns, ns_text in NAMESPACES:
            for action in ACTIONS:
                if count == operations:
                    break
                path = _path(ns, resource, action[0], action[2])
                paths.setdefault(path, {})[action[1]] = _operation(ns, ns_text, resource, resource_text, action)
                count += 1
    return {
        "openapi": "3.1.0",
        "info": {"title": title, "version": "1.0"},
        "servers": [{"url": "https://api.example.com/v1"}],
        "security": [{"key": []}],
        "paths": paths,
        "components": _components(),
    }


def facts(spec: dict[str, Any]) -> list[dict[str, str]]:
    """``{"operation_id", "namespace", "resource", "action", "summary"}`` of each operation, in document order."""
    out: list[dict[str, str]] = []
    for item in spec["paths"].values():
        for op in item.values():
            ns, action, resource = op["operationId"].split("_", 2)
            out.append(
                {"operation_id": op["operationId"], "namespace": ns, "resource": resource, "action": action,
                 "summary": op["summary"]}
            )  # fmt: skip
    return out
