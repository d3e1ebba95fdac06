"""Lines of tulip_memory/ without its migrations, and how many are docstrings and comments.

Usage: python bench/prose.py [ROOT] [--by-file]
"""

import ast
import io
import sys
import tokenize
from pathlib import Path

DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def _docstring_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, DOCUMENTED) or not node.body:
            continue
        first = node.body[0]
        if (
            isinstance(first, ast.Expr)
            and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)
        ):
            lines.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return lines


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    root = Path(args[0] if args else ".") / "tulip_memory"
    total = docstrings = comments = 0
    rows = []
    for path in sorted(root.rglob("*.py")):
        if "migrations" in path.parts:
            continue
        source = path.read_text()
        doc = _docstring_lines(ast.parse(source))
        com = {
            token.start[0]
            for token in tokenize.generate_tokens(io.StringIO(source).readline)
            if token.type == tokenize.COMMENT
        } - doc
        lines = source.count("\n")
        total, docstrings, comments = total + lines, docstrings + len(doc), comments + len(com)
        rows.append((len(doc) + len(com), lines, str(path)))
    prose = docstrings + comments
    print(
        f"lines {total}  docstring {docstrings}  comment {comments}  "
        f"prose {prose} ({100 * prose / total:.1f}%)"
    )
    if "--by-file" in sys.argv:
        for file_prose, lines, path in sorted(rows, reverse=True)[:60]:
            print(f"{file_prose:5d} {lines:5d} {path}")


if __name__ == "__main__":
    main()
