"""`belvedir billing [redeem CODE]`: the organization's balance, its recent ledger, coupons."""

from belvedir.cli.client import Client, out
from belvedir.text import usd as dollars


def cmd_billing(client: Client, args) -> int:
    data = client.get("/api/v1/billing")
    ledger = client.get("/api/v1/billing/ledger", params={"limit": args.limit})
    payg = "on" if data["pay_as_you_go"] else "off"
    lines = [
        f"balance       {dollars(data['balance_micros'])}",
        f"pay as you go {payg} (monthly limit {dollars(data['monthly_limit_micros'])})",
    ]
    if data["run_price_cpu_micros"] or data["run_price_gpu_micros"]:
        lines.append(
            f"run prices    CPU {dollars(data['run_price_cpu_micros'])}, "
            f"GPU {dollars(data['run_price_gpu_micros'])}"
        )
    else:
        lines.append("run prices    benchmark runs are not billed")
    for e in ledger["results"]:
        when = e["created_at"][:16].replace("T", " ")
        lines.append(
            f"  {when}  {e['kind']:<10} {dollars(e['amount_micros']):>10}  {e['reference']}"
        )
    out(args, {**data, "ledger": ledger["results"]}, lines)
    return 0


def cmd_billing_redeem(client: Client, args) -> int:
    data = client.post("/api/v1/billing/coupons/redeem", json={"code": args.code})
    entry = data["entry"]
    out(
        args,
        data,
        [
            f"redeemed {entry['reference']}: {dollars(entry['amount_micros'])} added; "
            f"balance {dollars(data['balance_micros'])}"
        ],
    )
    return 0


def register(sub) -> None:
    billing = sub.add_parser("billing", help="the organization's balance and ledger")
    billing.add_argument("--limit", type=int, default=10, help="ledger entries to show")
    billing.set_defaults(func=cmd_billing)
    actions = billing.add_subparsers(dest="billing_command")
    redeem = actions.add_parser("redeem", help="redeem a coupon code")
    redeem.add_argument("code")
    redeem.set_defaults(func=cmd_billing_redeem)
