"""`belvedir catalog`: the catalog's preset cards."""

from belvedir.cli.client import Client, out


def cmd_catalog(client: Client, args) -> int:
    data = client.get("/api/v1/catalog")
    lines = []
    for group in data["groups"]:
        lines.append(f"{group['group']}:")
        for p in group["presets"]:
            flag = "" if p["available"] else "  (not yet available)"
            lines.append(f"  {p['slug']:<22} {p['name']}{flag}")
    out(args, data, lines)
    return 0


def register(sub) -> None:
    sub.add_parser("catalog", help="list the catalog's presets").set_defaults(func=cmd_catalog)
