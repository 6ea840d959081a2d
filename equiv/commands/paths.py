"""``equiv paths``: an operation's built-ins (and, with ``--mutants``, its zoo) and its contract."""
from __future__ import annotations

from equiv.commands import add_json, add_op, check_outputs, write_json
from equiv.ops import get_op


def add_parser(sub):
    p = sub.add_parser("paths", help="list the built-in paths and the contract they meet")
    add_op(p)
    p.add_argument("--mutants", action="store_true", help="list the op's mutant zoo and legal variants too")
    add_json(p, "the list")
    p.set_defaults(run=run)


def generic_listing(op) -> tuple:
    """What every op can say of itself: its signature and its built-ins' names."""
    names = list(op.builtin_names())
    return ({"op": op.name, "signature": op.signature, "builtins": names},
            [f"{op.name}: {op.summary}", f"  signature: {op.signature}",
             f"  built-in {op.noun}s: {', '.join(names) or 'none'}"])


def run(args) -> int:
    check_outputs(json=args.json_out)
    op = get_op(args.op)
    doc, lines = op.listing() if op.listing is not None else generic_listing(op)
    if args.mutants:
        zoo = {n: getattr(m, "bug_class", "") for n, m in op.mutants().items()}
        legal = list(op.legal_variants())
        doc = {**doc, "mutants": zoo, "legal_variants": legal}
        lines = lines + ["", f"mutants ({op.mutants_module}:NAME):"] + [f"  {n}  {c}" for n, c in zoo.items()]
        lines += [f"legal variants (must pass): {', '.join(legal) or 'none'}"]
    write_json(args, doc)
    for line in lines:
        args.console.out(line)
    return 0
