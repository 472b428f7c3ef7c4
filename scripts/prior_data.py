#!/usr/bin/env python3
"""Builds the training corpus of lmzip's built-in prior from pinned registry packages.

Usage (scripts/prior-data.sh wraps this):
  prior_data.py build OUTDIR --packages TSV --corpus DIR --cache DIR [--seed N]
  prior_data.py resolve REGISTRY NAME...   print a TSV line (latest version, license) per package

Standard library only, so the corpus can be rebuilt anywhere Python 3.11 runs. Everything that
decides which bytes land in train.bin is sorted or keyed by a seeded hash: a rebuild from the same
package list gives the same bytes.
"""

import argparse
import base64
import hashlib
import io
import json
import os
import re
import sys
import tarfile
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile

USER_AGENT = "lmzip-prior-data/1 (rebuilds lmzip's prior training corpus)"
MAX_FILE_BYTES = 256 * 1024   # larger files are mostly data dumps or bundles
MIN_FILE_BYTES = 64           # empty __init__.py and the like teach nothing
MAX_AVG_LINE = 1000           # minified code and one-line JSON dumps
MAX_LINE_CODE = 4000          # one such line in JS/CSS is a bundle or a minified build
WINDOW = 64                   # benchmark slices are found by 64-byte windows at line starts
SEPARATOR = b"\x00"           # ends every document; no kept file holds a NUL byte
VALID_SHARE = 0.02            # share of each registry's bytes held back, whole packages at a time
# Bytes of each kind in the mixed corpus (about a third prose, half code, the rest markup/data).
BUDGET = {"prose": 28_000_000, "code": 42_000_000, "data": 14_000_000}


def die(msg):
    sys.stderr.write("prior_data: error: %s\n" % msg)
    sys.exit(1)


def log(msg):
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


# ---------------------------------------------------------------- registry access

def http_get(url, tries=3):
    """GET url; retries transient failures, then fails the build (never a silent gap)."""
    for attempt in range(tries):
        try:
            req = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
            with urllib.request.urlopen(req, timeout=120) as resp:
                return resp.read()
        except urllib.error.HTTPError as e:
            if e.code == 404 or attempt == tries - 1:
                die("%s: HTTP %d" % (url, e.code))
        except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
            if attempt == tries - 1:
                die("%s: %s" % (url, e))
        time.sleep(2 * (attempt + 1))


def http_json(url):
    return json.loads(http_get(url))


def crates_index_path(name):
    """Path of a crate in the sparse index (the layout cargo uses)."""
    n = name.lower()
    if len(n) <= 2:
        return "%d/%s" % (len(n), n)
    if len(n) == 3:
        return "3/%s/%s" % (n[0], n)
    return "%s/%s/%s" % (n[:2], n[2:4], n)


def crates_index_entries(name):
    text = http_get("https://index.crates.io/" + crates_index_path(name)).decode()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def locate(registry, name, version):
    """Returns (url, filename, checksum kind, checksum, registry license or None)."""
    if registry == "pypi":
        # The project document lists every release's files; the per-version document is not
        # served everywhere the registry is mirrored.
        doc = "https://pypi.org/pypi/%s/json" % name
        meta = http_json(doc)
        sdists = [u for u in meta["releases"].get(version, []) if u["packagetype"] == "sdist"]
        if not sdists:
            die("pypi %s %s: no sdist" % (name, version))
        u = sdists[0]
        # A mirror of the registry may give file addresses relative to the document.
        return urllib.parse.urljoin(doc, u["url"]), u["filename"], "sha256", u["digests"]["sha256"], pypi_license(meta["info"])
    if registry == "crates":
        entries = [e for e in crates_index_entries(name) if e["vers"] == version]
        if not entries:
            die("crates %s %s: not in the index" % (name, version))
        fname = "%s-%s.crate" % (name, version)
        url = "https://static.crates.io/crates/%s/%s" % (name, fname)
        # The index carries no license: it is read from the crate's own Cargo.toml after download.
        return url, fname, "sha256", entries[0]["cksum"], None
    if registry == "npm":
        meta = http_json("https://registry.npmjs.org/%s/%s" % (name.replace("/", "%2F"), version))
        dist = meta["dist"]
        fname = dist["tarball"].rsplit("/", 1)[1]
        if "integrity" in dist and dist["integrity"].startswith("sha512-"):
            return dist["tarball"], fname, "sha512-b64", dist["integrity"][7:], npm_license(meta)
        return dist["tarball"], fname, "sha1", dist["shasum"], npm_license(meta)
    die("unknown registry %r" % registry)


def pypi_license(info):
    """Registry license text: the SPDX expression where given, else the field and classifiers."""
    parts = []
    if info.get("license_expression"):
        parts.append(info["license_expression"])
    lic = info.get("license") or ""
    if lic and len(lic) < 200:      # some projects paste their whole license here
        parts.append(lic)
    elif lic:
        parts.append(license_from_text(lic))
    parts += [c for c in info.get("classifiers", []) if c.startswith("License ::")]
    return " | ".join(p for p in parts if p)


def npm_license(meta):
    lic = meta.get("license")
    if isinstance(lic, dict):
        lic = lic.get("type")
    if not lic and isinstance(meta.get("licenses"), list):
        lic = " OR ".join(l.get("type", "") for l in meta["licenses"] if isinstance(l, dict))
    return lic or ""


def license_from_text(text):
    """Names the license a pasted license text is (only the families the corpus accepts)."""
    if "Permission is hereby granted, free of charge" in text:
        return "MIT"
    if "Apache License" in text and "Version 2.0" in text:
        return "Apache-2.0"
    if "Redistribution and use in source and binary forms" in text:
        return "BSD"
    return "unrecognised license text"


def verify(data, kind, expected, what):
    """Fails the build when the download differs from the registry's published checksum."""
    if kind == "sha256":
        got = hashlib.sha256(data).hexdigest()
    elif kind == "sha1":
        got = hashlib.sha1(data).hexdigest()
    elif kind == "sha512-b64":
        got = base64.b64encode(hashlib.sha512(data).digest()).decode()
    else:
        die("unknown checksum kind %s" % kind)
    if got != expected:
        die("%s: checksum mismatch (%s): registry says %s, download is %s" % (what, kind, expected, got))


def fetch(registry, name, version, cache):
    """Downloads (or reads from the cache) one package, verified.

    Returns (archive bytes, archive file name, the registry's license text or None)."""
    url, fname, kind, expected, lic = locate(registry, name, version)
    path = os.path.join(cache, registry, fname.replace("/", "_"))
    data = None
    if os.path.exists(path):
        with open(path, "rb") as f:
            data = f.read()
    if data is None:
        data = http_get(url)
        verify(data, kind, expected, "%s %s %s" % (registry, name, version))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".part", "wb") as f:
            f.write(data)
        os.replace(path + ".part", path)
    else:
        verify(data, kind, expected, "%s %s %s (cached %s)" % (registry, name, version, path))
    return data, fname, lic


# ---------------------------------------------------------------- licenses

PERMISSIVE = {
    "MIT": r"\bMIT\b|\bX11\b|Expat",
    "MIT-0": r"MIT-0",
    "BSD-2-Clause": r"BSD",
    "BSD-3-Clause": r"BSD",
    "0BSD": r"0BSD|BSD",
    "Apache-2.0": r"Apache",
    "ISC": r"\bISC\b",
    "PSF-2.0": r"\bPSF\b|Python Software Foundation",
    "Zlib": r"\bzlib\b",
    "CC0-1.0": r"\bCC0\b",
    "Unlicense": r"Unlicense|Public Domain",
}
# A license term outside the permissive families; allowed only as the other side of an OR.
RESTRICTIVE = r"\b(A?GPL|LGPL|MPL|EPL|CDDL|SSPL|BUSL|CC-BY-SA|CC-BY-NC|Artistic|Proprietary|Commercial)"


def check_license(pinned, registry_text, what):
    """Every term of the pinned license must be permissive and named by the registry's metadata.

    The pinned license is an SPDX expression such as "MIT OR Apache-2.0"; the registry's text may
    be looser ("BSD License" classifiers), so each term is matched by its family's pattern.
    """
    for term in re.split(r"\s+(?:OR|AND|WITH)\s+|[()]", pinned):
        term = term.strip()
        if not term:
            continue
        if term not in PERMISSIVE:
            die("%s: pinned license term %r is not one the corpus accepts" % (what, term))
        if not registry_text or not re.search(PERMISSIVE[term], registry_text, re.I):
            die("%s: pinned license %s, but the registry says %r" % (what, pinned, registry_text))
    if re.search(RESTRICTIVE, registry_text) and " OR " not in registry_text.upper():
        die("%s: the registry's license %r names a non-permissive term" % (what, registry_text))


def crate_license(members):
    """The license field of a crate's Cargo.toml (crates.io's normalised copy of the manifest)."""
    for name, data in members:
        if name == "Cargo.toml":
            m = re.search(rb'^license\s*=\s*"([^"]*)"', data, re.M)
            if m:
                return m.group(1).decode()
            if re.search(rb"^license-file\s*=", data, re.M):
                return "license-file (not an SPDX expression)"
    return ""


# ---------------------------------------------------------------- archives

def archive_members(data, fname):
    """(path inside the package, bytes) for every regular file, the top folder stripped, sorted."""
    out = []
    if fname.endswith(".zip"):
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            for info in z.infolist():
                if not info.is_dir() and info.file_size <= MAX_FILE_BYTES:
                    out.append((strip_top(info.filename), z.read(info)))
    else:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as t:
            for m in t.getmembers():
                if m.isfile() and m.size <= MAX_FILE_BYTES:
                    out.append((strip_top(m.name), t.extractfile(m).read()))
    out = [(p, d) for p, d in out if p]
    out.sort(key=lambda x: x[0])
    return out


def strip_top(path):
    parts = path.lstrip("./").split("/", 1)
    return parts[1] if len(parts) == 2 else ""


# ---------------------------------------------------------------- file selection

CODE_EXT = {
    "rs", "py", "pyi", "pyx", "pxd", "js", "mjs", "cjs", "jsx", "ts", "tsx", "mts", "cts",
    "c", "h", "cc", "cpp", "cxx", "hpp", "hh", "hxx", "inl", "sh", "bash", "go", "java", "rb",
    "lua", "sql", "css", "scss", "less", "cmake",
}
PROSE_EXT = {"md", "markdown", "rst", "txt", "adoc", "rdoc"}
DATA_EXT = {"json", "toml", "yaml", "yml", "csv", "tsv", "html", "htm", "xml", "ini", "cfg", "orig"}
PROSE_NAMES = {"readme", "changelog", "changes", "history", "news", "contributing", "todo", "faq"}

# Files that are not the package's text: legal boilerplate, lockfiles, packaging metadata.
SKIP_NAME = re.compile(
    r"^(licen[cs]e|copying|notice|authors|contributors|copyright|patents|third[-_]?party\w*"
    r"|code[-_]of[-_]conduct|funding)([-_.].*)?$"
    r"|^(cargo\.lock|package-lock\.json|npm-shrinkwrap\.json|yarn\.lock|pnpm-lock\.yaml"
    r"|poetry\.lock|pipfile\.lock|uv\.lock|pkg-info|\.cargo_vcs_info\.json|sources\.txt"
    r"|dependency_links\.txt|top_level\.txt|entry_points\.txt|requires\.txt|record)$",
    re.I)
# Build outputs, vendored copies and other projects' code shipped inside a package.
SKIP_DIR = re.compile(
    r"(^|/)(dist|build|umd|bundles?|vendor|vendored|_vendor|third[-_]?party|node_modules"
    r"|vendored[-_][\w.-]+|subprojects|externals?|libs|_static|__pycache__|\.git|examplefiles|min)/", re.I)
SKIP_SUFFIX = re.compile(r"\.(min\.(js|css|mjs)|bundle\.js|map|js\.map|lock)$", re.I)
GENERATED = re.compile(r"\bgenerated\b|do not edit|do not modify|autogenerated", re.I)
LICENSE_TEXT = re.compile(
    r"Permission is hereby granted, free of charge|Apache License,?\s+Version 2\.0"
    r"|Redistribution and use in source and binary forms|GNU (LESSER |LIBRARY )?GENERAL PUBLIC LICENSE"
    r"|Mozilla Public License", re.I)

# Standard benchmark files, found by name wherever a package ships them as test data.
BENCH_STEMS = {
    "alice29", "asyoulik", "lcet10", "plrabn12", "ptt5", "kennedy", "xargs", "grammar", "fields",
    "cp", "sum", "book1", "book2", "bib", "geo", "news", "obj1", "obj2", "paper1", "paper2",
    "paper3", "paper4", "paper5", "paper6", "pic", "progc", "progl", "progp", "trans", "e.coli",
    "bible", "world192", "pi", "enwik4", "enwik5", "enwik6", "enwik8", "enwik9", "dickens",
    "mozilla", "mr", "nci", "ooffice", "osdb", "reymont", "samba", "sao", "webster", "x-ray",
    "fireworks", "geo.protodata", "kppkn", "paper-100k", "urls.10k", "html", "html_x_4",
}
BENCH_DIR = re.compile(r"(^|/)(calgary|canterbury|silesia|enwik\w*|gutenberg|large)(/|$)", re.I)


def kind_of(path):
    """prose, code or data by name; None for files the corpus does not take."""
    base = path.rsplit("/", 1)[-1]
    low = base.lower()
    if low in ("cmakelists.txt", "makefile"):
        return "code"
    if low.startswith("requirements") and low.endswith(".txt"):
        return "data"
    ext = low.rsplit(".", 1)[1] if "." in low else ""
    if ext in CODE_EXT:
        return "code"
    if ext in PROSE_EXT:
        return "prose"
    if ext in DATA_EXT:
        return "data"
    if low.split(".")[0] in PROSE_NAMES:
        return "prose"
    return None


def refine_kind(kind, data):
    """A .txt file that is mostly numbers or symbols (test tables, word lists) is data, not prose."""
    if kind != "prose":
        return kind
    sample = data[:20000].decode("utf-8", "replace")
    visible = [c for c in sample if not c.isspace()]
    letters = sum(c.isalpha() for c in visible)
    return "prose" if visible and letters >= 0.6 * len(visible) else "data"


def benchmark_name(path):
    base = path.rsplit("/", 1)[-1].lower()
    stem = base.rsplit(".", 1)[0] if "." in base else base
    if base in BENCH_STEMS or stem in BENCH_STEMS or BENCH_DIR.search(path):
        # 'sum', 'cp', 'html', 'news', 'pi'... are also ordinary words: only extension-less
        # files or the benchmark's own extension count, so news.rst or cp.py stay.
        return "." not in base or base in {
            "alice29.txt", "asyoulik.txt", "lcet10.txt", "plrabn12.txt", "cp.html", "fields.c",
            "grammar.lsp", "xargs.1", "kennedy.xls", "world192.txt", "bible.txt", "pi.txt",
            "e.coli", "fireworks.jpeg", "geo.protodata", "kppkn.gtb", "paper-100k.pdf",
            "urls.10k"} or BENCH_DIR.search(path) is not None
    return bool(re.match(r"pg\d+(-\d+)?\.txt$", base))


def reject_reason(path, data, kind):
    """Why a file is left out, or None to keep it."""
    base = path.rsplit("/", 1)[-1]
    if SKIP_NAME.match(base):
        return "license-or-meta"
    if SKIP_DIR.search(path) or SKIP_SUFFIX.search(base):
        return "build-or-vendored"
    if benchmark_name(path):
        return "benchmark-name"
    if len(data) < MIN_FILE_BYTES:
        return "tiny"
    if b"\x00" in data:
        return "binary"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "binary"
    lines = text.count("\n") + 1
    if len(data) / lines > MAX_AVG_LINE:
        return "long-lines"
    if kind == "code" and max(len(l) for l in text.split("\n")) > MAX_LINE_CODE:
        return "long-lines"
    head = "\n".join(text.split("\n", 5)[:5])
    if GENERATED.search(head):
        return "generated"
    if kind != "code" and LICENSE_TEXT.search(text[:1500]):
        return "license-text"
    return None


# ---------------------------------------------------------------- benchmark corpus

class BenchmarkGuard:
    """Recognises the shared benchmark corpus: whole files by hash, slices by 64-byte windows.

    Windows start at line starts in both the corpus and the candidate, so a verbatim copy of any
    stretch of lines is found without scanning every offset. Files without newlines (E.coli,
    pi.txt, the binaries) cannot hide in the corpus: the line-length and NUL filters drop them.
    A window counts only if it has 24 or more letters, so shared boilerplate such as a run of
    #include lines does not exclude a file; a file is left out at its second matching window.
    """

    def __init__(self, corpus_dir):
        self.hashes = set()
        self.windows = set()
        for root, _dirs, files in sorted(os.walk(corpus_dir)):
            for f in sorted(files):
                if f == "README.md":
                    continue
                with open(os.path.join(root, f), "rb") as fh:
                    data = fh.read()
                self.hashes.add(hashlib.sha256(data).hexdigest())
                for w in self.line_windows(data):
                    self.windows.add(w)
        if not self.hashes:
            die("no benchmark corpus files under %s" % corpus_dir)

    @staticmethod
    def line_windows(data):
        starts = [0] + [m.end() for m in re.finditer(rb"\n", data)]
        for s in starts:
            w = data[s:s + WINDOW]
            if len(w) == WINDOW and sum(c.isalpha() for c in w.decode("latin-1")) >= 24:
                yield w

    def matches(self, data, digest):
        if digest in self.hashes:
            return True
        hits = 0
        for w in self.line_windows(data):
            if w in self.windows:
                hits += 1
                if hits >= 2:
                    return True
        return False


# ---------------------------------------------------------------- build

def read_packages(path):
    """(registry, name, version, license) rows of the pinned list; '#' starts a comment."""
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].rstrip()
            if not line.strip():
                continue
            cols = line.split("\t")
            if len(cols) != 4:
                die("%s:%d: want registry<TAB>name<TAB>version<TAB>license" % (path, n))
            rows.append(tuple(c.strip() for c in cols))
    if len({(r, n) for r, n, _v, _l in rows}) != len(rows):
        die("%s: a package is listed twice" % path)
    return rows


def seeded_key(seed, *parts):
    """Deterministic shuffle key: the same on every Python version and machine."""
    return hashlib.sha256(("%d\0" % seed + "\0".join(parts)).encode()).hexdigest()


def collect(rows, cache, guard, stats):
    """Kept documents as dicts, in pinned-list order, exact duplicates dropped."""
    seen = set()
    docs = []
    for registry, name, version, lic in rows:
        what = "%s %s %s" % (registry, name, version)
        data, fname, reg_lic = fetch(registry, name, version, cache)
        members = archive_members(data, fname)
        if registry == "crates":
            reg_lic = crate_license(members)
        check_license(lic, reg_lic, what)
        kept = {"prose": 0, "code": 0, "data": 0}
        for path, content in members:
            kind = kind_of(path)
            if kind is None:
                stats["other-type"] = stats.get("other-type", 0) + 1
                continue
            reason = reject_reason(path, content, kind)
            kind = refine_kind(kind, content) if reason is None else kind
            digest = hashlib.sha256(content).hexdigest()
            if reason is None and guard.matches(content, digest):
                reason = "benchmark-content"
            if reason is None and digest in seen:
                reason = "duplicate"
            if reason and reason.startswith("benchmark"):
                log("  left out (%s): %s %s" % (reason, name, path))
            if reason:
                stats[reason] = stats.get(reason, 0) + 1
                continue
            seen.add(digest)
            docs.append(dict(registry=registry, package=name, version=version, license=lic,
                             path=path, kind=kind, data=content, sha256=digest))
            kept[kind] += len(content)
        log("%-6s %-26s %-12s prose %8d  code %8d  data %8d" % (
            registry, name, version, kept["prose"], kept["code"], kept["data"]))
    return docs


def water_level(sizes, budget):
    """The largest per-package cap c with sum(min(size, c)) <= budget (all of it if it fits)."""
    if sum(sizes) <= budget:
        return max(sizes, default=0)
    lo, hi = 0, max(sizes)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if sum(min(x, mid) for x in sizes) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo


GROUPS = {
    "code": {"rs": "rust", "py": "python", "pyi": "python", "pyx": "python", "pxd": "python",
             "js": "js-ts", "mjs": "js-ts", "cjs": "js-ts", "jsx": "js-ts", "ts": "js-ts",
             "tsx": "js-ts", "mts": "js-ts", "cts": "js-ts", "c": "c-cpp", "h": "c-cpp",
             "cc": "c-cpp", "cpp": "c-cpp", "cxx": "c-cpp", "hpp": "c-cpp", "hh": "c-cpp",
             "hxx": "c-cpp", "inl": "c-cpp"},
    "data": {"html": "markup", "htm": "markup", "xml": "markup", "json": "json", "csv": "tables",
             "tsv": "tables", "txt": "tables", "rst": "tables", "md": "tables"},
}


def group_of(d):
    """Language or format within a kind: each gets an even share of the kind's budget."""
    ext = d["path"].rsplit("/", 1)[-1].lower().rsplit(".", 1)[-1]
    other = {"code": "other-code", "data": "config", "prose": "prose"}[d["kind"]]
    return GROUPS.get(d["kind"], {}).get(ext, other)


def fill(docs, budget, key):
    """Splits budget evenly over the groups that key names (a water level: small groups keep
    everything), returns {group: its share}."""
    sizes = {}
    for d in docs:
        sizes[key(d)] = sizes.get(key(d), 0) + len(d["data"])
    cap = water_level(list(sizes.values()), budget)
    return {g: min(s, cap) for g, s in sizes.items()}


def mix(docs, seed):
    """Cuts each kind to its budget, evenly across languages (or formats) and then packages.

    Within a kind, each language or format group gets the same share of the budget unless it has
    less (a water level); within a group, each package gets the same share unless it has less, so
    no big project or language dominates; within a package, files are taken in seeded-hash order
    while they fit under its share.
    """
    kept = []
    for kind, budget in sorted(BUDGET.items()):
        of_kind = [d for d in docs if d["kind"] == kind]
        for group, share in sorted(fill(of_kind, budget, group_of).items()):
            in_group = [d for d in of_kind if group_of(d) == group]
            pkg_share = fill(in_group, share, lambda d: (d["registry"], d["package"]))
            used = {}
            for d in sorted(in_group, key=lambda d: seeded_key(seed, d["registry"], d["package"], d["path"])):
                pkg = (d["registry"], d["package"])
                if used.get(pkg, 0) + len(d["data"]) <= pkg_share[pkg]:
                    kept.append(d)
                    used[pkg] = used.get(pkg, 0) + len(d["data"])
            log("mix: %-5s %-10s %9d bytes of %9d, %3d packages" % (
                kind, group, sum(used.values()), sum(len(d["data"]) for d in in_group), len(pkg_share)))
    return kept


def choose_valid(docs, seed):
    """Whole packages held back for validation: about VALID_SHARE of each registry's bytes."""
    sizes = {}
    for d in docs:
        key = (d["registry"], d["package"])
        sizes[key] = sizes.get(key, 0) + len(d["data"])
    valid = set()
    for registry in sorted({r for r, _p in sizes}):
        pkgs = sorted((p for r, p in sizes if r == registry), key=lambda p: seeded_key(seed, registry, p))
        total = sum(sizes[(registry, p)] for p in pkgs)
        held = 0
        for p in pkgs:
            s = sizes[(registry, p)]
            if held + s <= 1.5 * VALID_SHARE * total:
                valid.add((registry, p))
                held += s
            if held >= VALID_SHARE * total:
                break
    return valid


def write_outputs(docs, valid, outdir, seed):
    os.makedirs(outdir, exist_ok=True)
    docs.sort(key=lambda d: seeded_key(seed, d["registry"], d["package"], d["path"]))
    split = {"train": [], "valid": []}
    for d in docs:
        split["valid" if (d["registry"], d["package"]) in valid else "train"].append(d)
    sums = {}
    for name, part in split.items():
        h = hashlib.sha256()
        with open(os.path.join(outdir, name + ".bin"), "wb") as f:
            for d in part:
                f.write(d["data"] + SEPARATOR)
                h.update(d["data"] + SEPARATOR)
        sums[name] = h.hexdigest()
    with open(os.path.join(outdir, "manifest.tsv"), "w") as f:
        f.write("split\tregistry\tpackage\tversion\tlicense\tkind\tpath\tbytes\tsha256\n")
        for name in ("train", "valid"):
            for d in split[name]:
                f.write("\t".join([name, d["registry"], d["package"], d["version"], d["license"],
                                   d["kind"], d["path"], str(len(d["data"])), d["sha256"]]) + "\n")
    with open(os.path.join(outdir, "SHA256SUMS"), "w") as f:
        for name in ("train", "valid"):
            f.write("%s  %s.bin\n" % (sums[name], name))
    return split, sums


def summary(split, sums, stats):
    lines = []
    for name in ("train", "valid"):
        part = split[name]
        total = sum(len(d["data"]) + 1 for d in part)
        lines.append("%s.bin: %d bytes, %d documents, %d packages, sha256 %s" % (
            name, total, len(part), len({(d["registry"], d["package"]) for d in part}), sums[name]))
        for k in ("prose", "code", "data"):
            b = sum(len(d["data"]) for d in part if d["kind"] == k)
            lines.append("  %-5s %11d bytes (%4.1f%%)" % (k, b, 100.0 * b / max(total, 1)))
        for r in ("pypi", "crates", "npm"):
            b = sum(len(d["data"]) for d in part if d["registry"] == r)
            lines.append("  %-6s %10d bytes (%4.1f%%)" % (r, b, 100.0 * b / max(total, 1)))
    lines.append("left out: " + ", ".join("%s %d" % kv for kv in sorted(stats.items())))
    return "\n".join(lines)


def cmd_build(args):
    rows = read_packages(args.packages)
    guard = BenchmarkGuard(args.corpus)
    log("benchmark guard: %d files, %d windows" % (len(guard.hashes), len(guard.windows)))
    stats = {}
    docs = mix(collect(rows, args.cache, guard, stats), args.seed)
    valid = choose_valid(docs, args.seed)
    split, sums = write_outputs(docs, valid, args.outdir, args.seed)
    text = summary(split, sums, stats)
    with open(os.path.join(args.outdir, "summary.txt"), "w") as f:
        f.write(text + "\n")
    print(text)


def cmd_resolve(args):
    """Prints pinned-list lines for the newest versions, to help whoever edits the list."""
    for name in args.names:
        if args.registry == "pypi":
            info = http_json("https://pypi.org/pypi/%s/json" % name)["info"]
            version, lic = info["version"], pypi_license(info)
        elif args.registry == "crates":
            live = [e for e in crates_index_entries(name) if not e.get("yanked")]
            live = [e for e in live if "-" not in e["vers"]] or live   # skip pre-releases
            version = live[-1]["vers"]
            url = "https://static.crates.io/crates/%s/%s-%s.crate" % (name, name, version)
            data = http_get(url)
            lic = crate_license(archive_members(data, url))
        else:
            meta = http_json("https://registry.npmjs.org/%s/latest" % name.replace("/", "%2F"))
            version, lic = meta["version"], npm_license(meta)
        print("%s\t%s\t%s\t%s" % (args.registry, name, version, lic))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("outdir")
    b.add_argument("--packages", required=True)
    b.add_argument("--corpus", required=True)
    b.add_argument("--cache", required=True)
    b.add_argument("--seed", type=int, default=26)
    r = sub.add_parser("resolve")
    r.add_argument("registry", choices=["pypi", "crates", "npm"])
    r.add_argument("names", nargs="+")
    args = ap.parse_args()
    {"build": cmd_build, "resolve": cmd_resolve}[args.cmd](args)


if __name__ == "__main__":
    main()
