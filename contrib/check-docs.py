#!/usr/bin/env python3
"""contrib/check-docs.py BUILDDIR: the checks of contrib/check-docs.sh (which
builds BUILDDIR first and says what is checked). Standard library only."""

import glob
import os
import re
import shlex
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(ROOT, "_build", "default")
USER_PAGES = ["README.md"] + sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))
LINK_PAGES = USER_PAGES + ["CHANGELOG.md"]
COLLS = ["allreduce", "bcast", "allgather", "reduce_scatter", "reduce_scatter_block", "reduce"]

counts = {"passed": 0, "failed": 0, "skipped": 0}


def report(kind, where, what):
    counts[kind] += 1
    label = {"passed": "PASS", "failed": "FAIL", "skipped": "SKIP"}[kind]
    print(f"{label} {where}: {what}")


def run(argv, env=None, cwd=ROOT, timeout=60):
    """(exit status, stdout + stderr) of argv; status 127 when it cannot start."""
    full = dict(os.environ)
    full.update(env or {})
    try:
        p = subprocess.run(argv, cwd=cwd, env=full, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=timeout, text=True, errors="replace")
        return p.returncode, p.stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        return 127, str(e)


# The built component, found by ompi_info and mpirun as an installed one is.
COMPONENT_ENV = {
    "OMPI_MCA_mca_base_component_path": f"{BUILD}/components:SYS_DEFAULT:USER_DEFAULT",
    "LD_LIBRARY_PATH": f"{BUILD}/src/.libs:" + os.environ.get("LD_LIBRARY_PATH", ""),
    "PKG_CONFIG_PATH": BUILD,
}


# ------------------------------------------------------------ markdown

def read_page(page):
    """Lines of a page, and its fenced code blocks as (first line, language, lines)."""
    lines = open(os.path.join(ROOT, page), encoding="utf-8").read().split("\n")
    blocks, prose, fence = [], [], None
    for n, line in enumerate(lines, 1):
        m = re.match(r"^\s*(```|~~~)(\S*)", line)
        if m and fence is None:
            fence = (m.group(1), n + 1, m.group(2), [])
        elif m and line.strip().startswith(fence[0]) and fence is not None:
            blocks.append(fence[1:])
            fence = None
        elif fence is not None:
            fence[3].append(line)
        else:
            prose.append((n, line))
    return prose, blocks


def slug(heading):
    """GitHub's anchor for a heading."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page):
    prose, _ = read_page(page)
    seen, out = {}, set()
    for _, line in prose:
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        s = slug(m.group(1))
        out.add(s if s not in seen else f"{s}-{seen[s]}")
        seen[s] = seen.get(s, 0) + 1
    return out


def tracked_files():
    code, out = run(["git", "ls-files"])
    return set(out.split("\n")) if code == 0 else None


TRACKED = tracked_files()


def in_repo(rel):
    """A repository path exists (tracked by git where this is a checkout)."""
    rel = os.path.normpath(rel)
    if not os.path.exists(os.path.join(ROOT, rel)):
        return False
    if TRACKED is None:
        return True
    return rel in TRACKED or any(f.startswith(rel + "/") for f in TRACKED)


def without_code_spans(line):
    return re.sub(r"`[^`]*`", "", line)


def check_links():
    cache = {}
    for page in LINK_PAGES:
        prose, _ = read_page(page)
        for n, line in prose:
            for m in re.finditer(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", without_code_spans(line)):
                target = m.group(1)
                where = f"{page}:{n}"
                if re.match(r"[a-z]+:", target):
                    continue  # http(s), mailto: not checked (no network in CI)
                path, _, anchor = target.partition("#")
                rel = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
                if path and not in_repo(rel):
                    report("failed", where, f"link {target}: {rel} is not in the repository")
                    continue
                if anchor and rel.endswith(".md"):
                    if rel not in cache:
                        cache[rel] = anchors(rel)
                    if anchor not in cache[rel]:
                        report("failed", where, f"link {target}: no heading #{anchor} in {rel}")
                        continue
                report("passed", where, f"link {target}")


# ------------------------------------------------------------ MCA parameters

def parsable_params(framework, component):
    code, out = run(["ompi_info", "--param", framework, component, "--level", "9", "--parsable"],
                    env=COMPONENT_ENV)
    values, enums = {}, {}
    for line in out.split("\n"):
        m = re.match(r"^mca:[^:]+:[^:]+:param:([^:]+):value:(.*)$", line)
        if m:
            values[m.group(1)] = m.group(2).strip('"')
        m = re.match(r"^mca:[^:]+:[^:]+:param:([^:]+):enumerator:value:[^:]+:(.*)$", line)
        if m:
            enums.setdefault(m.group(1), []).append(m.group(2))
    return code, values, enums


def tuning_rows():
    """The parameter tables of docs/tuning.md: name -> (line, default, whole row)."""
    rows = {}
    prose, _ = read_page("docs/tuning.md")
    for n, line in prose:
        m = re.match(r"^\|\s*`(coll_gpucoll_[^`]+)`\s*\|\s*([^|]*)\|", line)
        if m:
            names = [m.group(1)]
            if m.group(1) == "coll_gpucoll_<coll>_algorithm":
                names = [f"coll_gpucoll_{c}_algorithm" for c in COLLS]
            for name in names:
                rows[name] = (n, m.group(2).strip(), line)
    return rows


def check_params(known_all, ours, enums):
    """Every coll_gpucoll_* the docs name exists; every one the component has is
    in docs/tuning.md, with its default and every value it takes."""
    if not ours:
        report("failed", "ompi_info", "lists no coll_gpucoll_* parameter: is the component built?")
        return
    report("passed", "ompi_info --param coll gpucoll --level 9", f"{len(ours)} parameters")
    for page in USER_PAGES:
        prose, blocks = read_page(page)
        texts = list(prose) + [(b[0] + i, l) for b in blocks for i, l in enumerate(b[2])]
        seen = set()
        for n, line in texts:
            for m in re.finditer(r"(?<![A-Za-z0-9_])(?:OMPI_MCA_)?(coll_gpucoll_[a-z0-9_]*[a-z0-9])(?![A-Za-z0-9_.<]|\.[ch]\b)", line):
                name = m.group(1)
                if name in seen or line[m.end():m.end() + 1] in ("<",):
                    continue
                seen.add(name)
                if name in known_all:
                    report("passed", f"{page}:{n}", f"MCA parameter {name} exists")
                else:
                    report("failed", f"{page}:{n}", f"MCA parameter {name} is not in ompi_info's list")
    rows = tuning_rows()
    for name, value in sorted(ours.items()):
        if name not in rows:
            report("failed", "docs/tuning.md", f"{name} (ompi_info) is not in the parameter tables")
            continue
        n, default, row = rows[name]
        want = "" if default in ("(none)", "") else default
        if want != value:
            report("failed", f"docs/tuning.md:{n}", f"{name}: default '{default}', ompi_info says '{value}'")
            continue
        values = enums.get(name, [])
        if set(values) == {"true", "false"}:
            values = []  # a boolean: its row says what true does
        missing = [v for v in values if f"`{v}`" not in row and not re.search(rf"\b{re.escape(v)}\b", row)]
        if missing:
            report("failed", f"docs/tuning.md:{n}", f"{name}: values {', '.join(missing)} not described")
            continue
        report("passed", f"docs/tuning.md:{n}", f"{name}: documented, default {value or '(none)'}")


# ------------------------------------------------------------ commands

def header_comment(path):
    """A script's usage: its leading comment block."""
    out = []
    for line in open(path, encoding="utf-8", errors="replace").read().split("\n")[1:]:
        if not line.startswith("#"):
            if out:
                break
            continue
        out.append(line)
    return "\n".join(out)


HELP_FLAG = {"contrib/bench.sh": "-h", "contrib/gpu-run.sh": "--help", "contrib/host-cost.sh": "-h",
             "contrib/calibrate.py": "-h", "contrib/model-check.py": "-h", "contrib/auto-check.py": "-h",
             "contrib/plot-bench.py": "-h", "contrib/selection-table.py": "-h", "configure": "--help",
             "gpucoll_bench": "--help", "gpucoll_topo": "--help", "gpucoll_host_overhead": "-h",
             "gpucoll_kernel_bench": "-h", "make": "--help", "pkg-config": "--help"}
# Tools whose words after the name (not options) must be in their usage: steps, suites, jobs.
SUBCOMMANDS = {"contrib/gpu-run.sh": "all", "contrib/sanitize.sh": "first",
               "contrib/test-series.sh": "all", "gpucoll_bench": "first"}
# Scripts that hand their options to configure.
TO_CONFIGURE = {"contrib/setup.sh", "contrib/test.sh"}
BUILT = {"gpucoll_bench": "perf/gpucoll_bench", "gpucoll_topo": "tools/gpucoll_topo",
         "gpucoll_host_overhead": "perf/gpucoll_host_overhead",
         "gpucoll_kernel_bench": "perf/gpucoll_kernel_bench"}
usage_cache = {}


def usage(key, path):
    if key not in usage_cache:
        if key == "mpirun":
            usage_cache[key] = run(["mpirun", "--allow-run-as-root", "--help", "all"])[1]
        elif key in HELP_FLAG:
            usage_cache[key] = run([path, HELP_FLAG[key]], env=COMPONENT_ENV)[1]
        else:
            usage_cache[key] = header_comment(path)
    return usage_cache[key]


def mpirun_arity():
    arity = {}
    for line in usage("mpirun", None).split("\n"):
        m = re.match(r"^\s*(-[\w|-]+)((?:\s+<arg\d>)*)", line)
        if m:
            for name in m.group(1).split("|"):
                arity[name] = len(re.findall(r"<arg\d>", m.group(2)))
    return arity


def placeholder(word):
    return ("..." in word or "|" in word or re.fullmatch(r"[A-Z][A-Z0-9_:.,|=-]*", word) is not None
            or word.startswith("<") or word.startswith("$D") or word.startswith("./app"))


def option_names(words):
    out = []
    for w in words:
        w = w.strip("[]")
        if w == "--" or not w.startswith("-") or w == "-" or re.match(r"^-\d", w):
            continue
        out.append(w.split("=", 1)[0])
    return out


def has_option(text, opt):
    """OPT is one of the options the usage text defines: at the start of a line
    (indented a little, after a comment's '#'; a deeper indent is a
    description), after another spelling of it ('-c|-np', '-b B, --build B')
    or in a synopsis ('[-b BUILD]')."""
    o = re.escape(opt)
    return re.search(rf"(^#?[ \t]{{0,6}}(?:-[\w-]+(?:\s+\S+)?[|,]\s*)*{o}|[\[|]{o})(?![\w-])", text, re.M) is not None


def mentions(text, word):
    return re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text) is not None


def split_commands(text):
    """Simple commands of a shell snippet: split on ; && || | and newlines
    outside quotes; $(...) inner commands come out as commands of their own."""
    text = re.sub(r"(?<=\s)(\d*>&\d+|&>\s*\S+|\d*>>?\s*[^\s;&|]+|<\s*[^\s;&|]+)", " ", text)
    cmds, cur, quote, i = [], "", None, 0
    inner = []
    while i < len(text):
        c = text[i]
        if quote:
            cur += c
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
            cur += c
        elif text.startswith("$(", i) and not text.startswith("$((", i):
            j, d = i + 2, 1
            while j < len(text) and d:
                d += {"(": 1, ")": -1}.get(text[j], 0)
                j += 1
            inner.extend(split_commands(text[i + 2:j - 1]))
            cur += "SUBST"
            i = j
            continue
        elif c == "#" and (not cur or cur[-1].isspace()):
            while i < len(text) and text[i] != "\n":
                i += 1
            continue
        elif c in ";\n|&":
            if cur.strip():
                cmds.append(cur.strip())
            cur = ""
            while i + 1 < len(text) and text[i + 1] in "|&" and c != "\n":
                i += 1
        else:
            cur += c
        i += 1
    if cur.strip():
        cmds.append(cur.strip())
    return cmds + inner


class Shell:
    """What a code block's earlier lines set: variables, the directory."""

    def __init__(self):
        self.vars = {"B": BUILD, "PWD": ROOT}
        self.cwd = ROOT

    def expand(self, word):
        word = re.sub(r"\$\{?(\w+)\}?", lambda m: self.vars.get(m.group(1), m.group(0)), word)
        return word


def resolve(prog, shell):
    """(key, path) of a command name: a repository script, a built program, a
    tool on the PATH; None where it is not found."""
    prog = shell.expand(prog)
    base = os.path.basename(prog)
    if base in BUILT:
        path = os.path.join(BUILD, BUILT[base])
        return (base, path if os.path.exists(path) else None)
    if "/" in prog:
        path = os.path.normpath(os.path.join(shell.cwd, prog))
        if path.startswith(BUILD + "/"):
            return (os.path.relpath(path, BUILD), path if os.path.exists(path) else None)
        rel = os.path.relpath(path, ROOT)
        key = "configure" if rel == "configure" else rel
        if rel == "configure":  # generated by autogen.sh: present in a set-up tree
            return (key, path if os.path.exists(path) else None)
        return (key, path if in_repo(rel) else None)
    return (prog, shutil.which(prog))


def check_command(text, where, shell, inline=False):
    try:
        words = shlex.split(text, posix=True)
    except ValueError as e:
        report("failed", where, f"cannot parse '{text}': {e}")
        return
    while words and re.match(r"^\w+=", words[0]):  # assignments before a command
        name, _, value = words.pop(0).partition("=")
        shell.vars[name] = shell.expand(value)
        if name.startswith("OMPI_MCA_"):
            check_mca(name[len("OMPI_MCA_"):], where)
    if not words or words[0] in ("for", "done", "then", "fi", "else", "while"):
        return
    if words[0] in ("do", "sudo", "env", "exec", "time", "nice"):
        words = words[1:]
    if not words:
        return
    prog = words[0]
    if prog == "export":
        for w in words[1:]:
            name, _, value = w.partition("=")
            shell.vars[name] = shell.expand(value)
            if name.startswith("OMPI_MCA_"):
                check_mca(name[len("OMPI_MCA_"):], where)
        return
    if prog == "cd":
        target = shell.expand(words[1]) if len(words) > 1 else ROOT
        shell.cwd = os.path.normpath(os.path.join(shell.cwd, target))
        return
    if placeholder(prog):
        report("skipped", where, f"{prog}: stands for your program")
        return
    key, path = resolve(prog, shell)
    if path is None:
        if key in BUILT or key.startswith("perf/") or key.startswith("tools/"):
            report("failed", where, f"{prog}: not built in {BUILD}")
        elif key in ("srun", "nvidia-smi", "nvidia-cuda-mps-control", "lstopo", "valgrind", "debootstrap"):
            report("skipped", where, f"{prog}: not installed here")
        else:
            report("failed", where, f"{prog}: no such script or program")
        return
    args = words[1:]
    if key == "mpirun":
        check_mpirun(args, where, shell)
        return
    if key == "ompi_info":
        code, out = run([path] + [shell.expand(a) for a in args], env=COMPONENT_ENV)
        ok = code == 0 and ("gpucoll" not in args or "coll_gpucoll_" in out)
        report("passed" if ok else "failed", where, f"ran: ompi_info {' '.join(args)}" + ("" if ok else f" (exit {code})"))
        return
    if key == "pkg-config" and "gpucoll" in args:
        code, out = run([path] + args, env=COMPONENT_ENV)
        report("passed" if code == 0 else "failed", where, f"ran: pkg-config {' '.join(args)} (the build's gpucoll.pc)")
        return
    files = [a for a in args if "/" in a]
    if (key == "gpucoll_topo" and inline and files and not any(placeholder(a) for a in args)
            and all(os.path.exists(os.path.join(ROOT, f)) for f in files)):
        expanded = [shell.expand(a) for a in args]
        code, out = run([path] + expanded, env=COMPONENT_ENV)
        report("passed" if code == 0 else "failed", where, f"ran: gpucoll_topo {' '.join(args)}" + ("" if code == 0 else f" (exit {code})"))
        return
    check_options(key, path, args, where)


def check_options(key, path, args, where):
    own, passed_on = args, []
    if "--" in args:
        own, passed_on = args[:args.index("--")], args[args.index("--") + 1:]
    if key in TO_CONFIGURE:
        text = usage("configure", os.path.join(ROOT, "configure"))
        tool = "configure"
    elif key in HELP_FLAG or key.startswith("contrib/") or key.startswith(".ci/") or key == "autogen.sh":
        text = usage(key, path)
        tool = key
    else:
        report("passed", where, f"{key}: found")
        return
    bad = [o for o in option_names(own) if not has_option(text, o) and o != HELP_FLAG.get(key)]
    mode = SUBCOMMANDS.get(key)
    positional = [a for a in own if not a.startswith("-") and not placeholder(a) and re.fullmatch(r"[a-z][a-z0-9_-]*", a)]
    if mode == "first":
        positional = positional[:1]
    if mode:
        bad += [p for p in positional if not mentions(text, p)]
    if passed_on and key == "contrib/bench.sh":
        bench = usage("gpucoll_bench", os.path.join(BUILD, BUILT["gpucoll_bench"]))
        bad += [o for o in option_names(passed_on) if not has_option(bench, o)]
    if bad:
        report("failed", where, f"{key}: {', '.join(bad)} not in {tool}'s usage")
    else:
        said = option_names(own) + (positional if mode else [])
        report("passed", where, f"{key}: found" + (f"; {' '.join(said)} in its usage" if said else ""))


MCA_ALL = {}


def check_mca(name, where):
    if placeholder(name) or name.endswith("_NAME"):
        return
    if name in MCA_ALL:
        report("passed", where, f"MCA parameter {name} exists")
    else:
        report("failed", where, f"MCA parameter {name} is not in ompi_info's list")


def check_mpirun(args, where, shell):
    arity = mpirun_arity()
    i, bad = 0, []
    while i < len(args):
        a = args[i]
        if a == ":":  # MPMD: the next application context
            i += 1
            continue
        if not a.startswith("-"):
            break
        name = a.split("=", 1)[0]
        if name not in arity:
            bad.append(name)
            i += 1
            continue
        if name in ("--mca", "-mca", "--gmca", "-gmca") and i + 1 < len(args):
            check_mca(args[i + 1], where)
        i += 1 + arity[name]
    if bad:
        report("failed", where, f"mpirun: {', '.join(bad)} not in 'mpirun --help all'")
    else:
        report("passed", where, "mpirun: its options in 'mpirun --help all'")
    if i < len(args):
        rest = args[i:]
        if ":" in rest:  # MPMD: the next application context has options of its own
            j = rest.index(":")
            rest, more = rest[:j], rest[j + 1:]
            check_mpirun(more, where, shell)
        check_command(" ".join(shlex.quote(a) for a in rest), where, shell)


def prompt_block_output(block, where):
    """A text block that starts with '$ gpucoll_topo ...': run it and compare."""
    first, _, lines = block
    cmd = lines[0][2:]
    words = shlex.split(cmd)
    key, path = resolve(words[0], Shell())
    if path is None:
        report("failed", where, f"{words[0]}: not built")
        return
    code, out = run([path] + words[1:], env=COMPONENT_ENV)
    want = "\n".join(lines[1:]).rstrip("\n")
    if code == 0 and out.rstrip("\n") == want:
        report("passed", where, f"ran: {cmd}: the output shown is what it prints")
    else:
        report("failed", where, f"ran: {cmd}: exit {code}, output differs from the page")


def check_blocks():
    for page in USER_PAGES:
        prose, blocks = read_page(page)
        for first, lang, lines in blocks:
            if lang == "text" and lines and lines[0].startswith("$ "):
                prompt_block_output((first, lang, lines), f"{page}:{first}")
                continue
            if lang not in ("sh", "bash", "shell", "console"):
                continue
            shell = Shell()
            text = "\n".join(lines).replace("\\\n", " ")
            for cmd in split_commands(text):
                check_command(cmd, f"{page}:{first}", shell)


# Inline code that names a command of the project or a repository path.
INLINE_COMMAND = re.compile(r"^(contrib/\S+|\.ci/run|gpucoll_topo|gpucoll_bench|perf/gpucoll_\w+|mpirun|ompi_info)(\s|$)")
INLINE_PATH = re.compile(r"^(src|coll|include|test|perf|contrib|tools|docs|\.ci)/[\w./{},*-]*$")


def expand_braces(path):
    m = re.search(r"\{([^{}]*)\}", path)
    if not m:
        return [path]
    return [p for alt in m.group(1).split(",") for p in expand_braces(path[:m.start()] + alt + path[m.end():])]


def path_exists(rel):
    """A repository path (a glob), or a program built from one (perf/gpucoll_bench:
    perf/gpucoll_bench.c, test/unit/test_inter: test/unit/test_inter.cc)."""
    hits = [os.path.relpath(f, ROOT) for f in glob.glob(os.path.join(ROOT, rel))]
    if any(in_repo(h) for h in hits):
        return True
    return any(in_repo(rel + ext) for ext in (".c", ".cc")) and os.path.exists(os.path.join(BUILD, rel))


def check_inline():
    for page in USER_PAGES:
        prose, _ = read_page(page)
        for n, line in prose:
            for m in re.finditer(r"`([^`]+)`", line):
                span, where = m.group(1).strip(), f"{page}:{n}"
                if INLINE_PATH.match(span) and " " not in span:
                    if ".libs" in span:
                        continue
                    found = all(path_exists(p) for p in expand_braces(span.rstrip("/")))
                    report("passed" if found else "failed", where, f"path {span}" + ("" if found else " is not in the repository"))
                elif INLINE_COMMAND.match(span) and " " in span:
                    check_command(span, where, Shell(), inline=True)


# ------------------------------------------------------------ counts in the docs

def makefile_tests():
    text = open(os.path.join(ROOT, "Makefile.am"), encoding="utf-8").read().replace("\\\n", " ")
    tests = []
    for m in re.finditer(r"^TESTS \+?= *(.*)$", text, re.M):
        tests += m.group(1).split()
    return tests


def check_counts():
    tests = makefile_tests()
    unit = [t for t in tests if t.startswith("test/unit/")]
    mpi = [t for t in tests if t.startswith("test/mpi/")]
    text = open(os.path.join(ROOT, "docs", "sanitizers.md"), encoding="utf-8").read()
    tools = [t for t in tests if t.startswith("test/tools/")]
    process = [t for t in tests if t.startswith("test/process/")]
    for phrase in (f"{len(unit)} unit test programs", f"{len(mpi)} MPI test scripts",
                   f"{len(tools)} tool scripts", f"{len(process)} process-life scripts",
                   f"the same {len(tests)} tests"):
        ok = phrase in text
        report("passed" if ok else "failed", "docs/sanitizers.md", f"'{phrase}' (Makefile.am's TESTS)")
    tsan = re.search(r'units="([^"]*)"', open(os.path.join(ROOT, "contrib", "sanitize.sh")).read())
    if tsan:
        n = len(tsan.group(1).split())
        ok = f"the {n} unit tests that start threads" in text
        report("passed" if ok else "failed", "docs/sanitizers.md", f"the tsan job's {n} unit tests (contrib/sanitize.sh)")
    # The steps of contrib/gpu-run.sh, as docs/testing.md lists them.
    steps = set()
    for line in usage("contrib/gpu-run.sh", os.path.join(ROOT, "contrib", "gpu-run.sh")).split("\n"):
        m = re.match(r"^  ([a-z][a-z0-9-]+)(?:, ([a-z][a-z0-9-]+))?\s{2,}", line)
        if m:
            steps.update(s for s in m.groups() if s)
    testing = open(os.path.join(ROOT, "docs", "testing.md"), encoding="utf-8").read()
    m = re.search(r"`contrib/gpu-run.sh --help` lists every step:(.*?)\n\n", testing, re.S)
    listed = set(re.findall(r"`([a-z][a-z0-9-]+)`", m.group(1))) if m else set()
    if steps and steps == listed:
        report("passed", "docs/testing.md", f"the {len(steps)} steps of contrib/gpu-run.sh --help")
    else:
        report("failed", "docs/testing.md", "steps of contrib/gpu-run.sh: "
               f"not listed {sorted(steps - listed)}, not in --help {sorted(listed - steps)}")


def main():
    code, ours, enums = parsable_params("coll", "gpucoll")
    _, everything, _ = parsable_params("all", "all")
    MCA_ALL.update(everything)
    check_links()
    check_params(everything, ours, enums)
    check_blocks()
    check_inline()
    check_counts()
    print(f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
