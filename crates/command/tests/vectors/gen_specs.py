#!/usr/bin/env python3
"""Generates crates/command/src/builtin.rs (the built-in command specs) from a capture made
by capture_commands.py: Valkey 9.1's COMMAND INFO and COMMAND DOCS (the values the command
table follows; where Redis 7.0 differs, tests/command_info.rs lists each difference).

Usage: gen_specs.py commands-valkey-9.1.json ../../src/builtin.rs

What is not in COMMAND INFO comes from the Valkey sources this script names: the command
kind the router and client state treat specially, and the key function (`getkeys_proc`) of
each command whose key specs can be incomplete (src/commands/*.json `get_keys_function`).
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from capture_commands import parse  # noqa: E402

KINDS = {
    "multi": "Multi", "exec": "Exec", "discard": "Discard", "watch": "Watch",
    "asking": "Asking", "readonly": "Readonly", "readwrite": "Readwrite",
    "select": "Select", "swapdb": "Swapdb", "migrate": "Migrate", "move": "Move",
    "copy": "Copy", "eval": "EvalScript", "eval_ro": "EvalScript",
    "evalsha": "EvalOther", "evalsha_ro": "EvalOther", "fcall": "EvalOther",
    "fcall_ro": "EvalOther", "reset": "Reset", "quit": "Quit", "cluster": "Cluster",
}

# Valkey src/db.c: the getkeys_proc of each command (genericGetKeys arguments).
def generic(store, count, first, step):
    return "KeysProc::Generic { store: %d, count: %d, first: %d, step: %d }" % (store, count, first, step)

PROCS = {
    "eval": generic(0, 2, 3, 1), "evalsha": generic(0, 2, 3, 1),
    "eval_ro": generic(0, 2, 3, 1), "evalsha_ro": generic(0, 2, 3, 1),
    "fcall": generic(0, 2, 3, 1), "fcall_ro": generic(0, 2, 3, 1),
    "zunionstore": generic(1, 2, 3, 1), "zinterstore": generic(1, 2, 3, 1),
    "zdiffstore": generic(1, 2, 3, 1),
    "zunion": generic(0, 1, 2, 1), "zinter": generic(0, 1, 2, 1), "zdiff": generic(0, 1, 2, 1),
    "zintercard": generic(0, 1, 2, 1), "sintercard": generic(0, 1, 2, 1),
    "lmpop": generic(0, 1, 2, 1), "zmpop": generic(0, 1, 2, 1),
    "blmpop": generic(0, 2, 3, 1), "bzmpop": generic(0, 2, 3, 1),
    "sort": "KeysProc::Sort", "sort_ro": "KeysProc::SortRo", "migrate": "KeysProc::Migrate",
    "georadius": "KeysProc::Georadius", "georadiusbymember": "KeysProc::Georadius",
    "xread": "KeysProc::Xread", "xreadgroup": "KeysProc::Xread",
    "set": "KeysProc::Set", "bitfield": "KeysProc::Bitfield",
}

CMD_FLAGS = {n: n.upper() for n in [
    "write", "readonly", "denyoom", "module", "admin", "pubsub", "noscript", "blocking",
    "loading", "stale", "skip_monitor", "skip_commandlog", "fast", "no_auth",
    "no_mandatory_keys", "no_async_loading", "no_multi", "movablekeys", "allow_busy", "asking"]}
KEY_FLAGS = {n: n.upper() for n in [
    "RO", "RW", "OW", "RM", "access", "update", "insert", "delete", "not_key", "incomplete",
    "variable_flags"]}
ARG_TYPES = {"string": "String", "integer": "Integer", "double": "Double", "key": "Key",
             "pattern": "Pattern", "unix-time": "UnixTime", "pure-token": "PureToken",
             "oneof": "Oneof", "block": "Block"}


def text(s):
    s = s.encode("latin-1").decode("utf-8")
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def mapv(v):
    assert v[0] == "%", v
    return {k[1]: x for k, x in v[1]}


def items(v):
    assert v[0] in "*~", v
    return v[1]


def bits(prefix, names, table):
    if not names:
        return prefix + "::NONE"
    return ".or(".join(prefix + "::" + table[n] for n in names) + ")" * (len(names) - 1)


def acl(names):
    if not names:
        return "A::NONE"
    parts = ["A::" + n[1:].upper() for n in names]
    return ".or(".join(parts) + ")" * (len(parts) - 1)


def key_spec(v):
    m = mapv(v)
    flags = [f[1] for f in items(m["flags"])]
    bs, fk = mapv(m["begin_search"]), mapv(m["find_keys"])
    bsp, fkp = mapv(bs["spec"]), mapv(fk["spec"])
    t = bs["type"][1]
    if t == "index":
        begin = "BeginSearch::Index(%d)" % bsp["index"][1]
    elif t == "keyword":
        begin = "BeginSearch::Keyword { keyword: %s, startfrom: %d }" % (
            text(bsp["keyword"][1]), bsp["startfrom"][1])
    else:
        begin = "BeginSearch::Unknown"
    t = fk["type"][1]
    if t == "range":
        find = "FindKeys::Range { lastkey: %d, keystep: %d, limit: %d }" % (
            fkp["lastkey"][1], fkp["keystep"][1], fkp["limit"][1])
    elif t == "keynum":
        find = "FindKeys::Keynum { keynumidx: %d, firstkey: %d, keystep: %d }" % (
            fkp["keynumidx"][1], fkp["firstkey"][1], fkp["keystep"][1])
    else:
        find = "FindKeys::Unknown"
    notes = "Some(%s)" % text(m["notes"][1]) if "notes" in m else "None"
    return "KeySpec { notes: %s, flags: %s, begin: %s, find: %s }" % (
        notes, bits("K", flags, KEY_FLAGS), begin, find)


def arg(v, ind):
    m = mapv(v)
    known = {"name", "type", "display_text", "key_spec_index", "token", "summary", "since",
             "flags", "deprecated_since", "arguments"}
    assert set(m) <= known, set(m) - known
    s = "Arg::new(%s, T::%s)" % (text(m["name"][1]), ARG_TYPES[m["type"][1]])
    if "display_text" in m:
        s += ".display(%s)" % text(m["display_text"][1])
    if "key_spec_index" in m:
        s += ".key_spec(%d)" % m["key_spec_index"][1]
    if "token" in m:
        s += ".token(%s)" % text(m["token"][1])
    if "summary" in m:
        s += ".summary(%s)" % text(m["summary"][1])
    if "since" in m:
        s += ".since(%s)" % text(m["since"][1])
    if "flags" in m:
        s += ".flags(%s)" % bits("AF", [f[1] for f in items(m["flags"])],
                                 {"optional": "OPTIONAL", "multiple": "MULTIPLE",
                                  "multiple_token": "MULTIPLE_TOKEN"})
    if "deprecated_since" in m:
        s += ".deprecated(%s)" % text(m["deprecated_since"][1])
    if "arguments" in m:
        s += ".args(" + args(m["arguments"], ind + 1) + ")"
    return s


def args(v, ind):
    pad = "    " * (ind + 1)
    return "&[\n" + "".join(pad + arg(a, ind) + ",\n" for a in items(v)) + "    " * ind + "]"


def doc(m, ind):
    known = {"summary", "since", "group", "complexity", "doc_flags", "deprecated_since",
             "replaced_by", "history", "arguments", "subcommands"}
    assert set(m) <= known, set(m) - known
    s = "CommandDoc::new(%s, %s, %s)" % (text(m["summary"][1]), text(m["since"][1]),
                                         text(m["group"][1]))
    if "complexity" in m:
        s += ".complexity(%s)" % text(m["complexity"][1])
    if "doc_flags" in m:
        s += ".flags(%s)" % bits("D", [f[1] for f in items(m["doc_flags"])],
                                 {"deprecated": "DEPRECATED", "syscmd": "SYSCMD"})
    if "deprecated_since" in m or "replaced_by" in m:
        s += ".deprecated(%s, %s)" % (text(m["deprecated_since"][1]), text(m["replaced_by"][1]))
    if "history" in m:
        s += ".history(&[" + ", ".join(
            "(%s, %s)" % (text(h[1][0][1]), text(h[1][1][1])) for h in items(m["history"])) + "])"
    if "arguments" in m:
        s += ".args(" + args(m["arguments"], ind) + ")"
    return s


def spec(name, info, docs, subs, ind):
    (_, n), (_, arity), flags, (_, first), (_, last), (_, step), acls, tips, kss, _subs = \
        info[1]
    assert n == name
    pad = "    " * ind
    flags = [f[1] for f in items(flags)]
    kind = KINDS.get(name, "ClusterSub" if name.startswith("cluster|") else "Plain")
    out = [
        "CommandSpec {",
        "    name: %s," % text(name),
        "    arity: %d," % arity,
        "    flags: %s," % bits("F", flags, CMD_FLAGS),
        "    acl: %s," % acl([a[1] for a in items(acls)]),
        "    first_key: %d," % first,
        "    last_key: %d," % last,
        "    key_step: %d," % step,
        "    tips: &[%s]," % ", ".join(text(t[1]) for t in items(tips)),
        "    key_specs: &[%s]," % "".join("\n" + pad + "        " + key_spec(k) + ","
                                           for k in items(kss)) + ("\n" + pad + "    " if items(kss) else ""),
        "    keys_proc: %s," % PROCS.get(name, "KeysProc::None"),
        "    kind: CommandKind::%s," % kind,
        "    subcommands: %s," % subs,
        "    doc: %s," % doc(docs, ind + 1),
        "}",
    ]
    return ("\n" + pad).join(out)


def main():
    src, dst = sys.argv[1], sys.argv[2]
    cap = json.load(open(src))
    by = {e["name"]: e for e in cap["commands"]}
    for e in by.values():
        e["info"] = parse(e["info3"])
        e["docs"] = parse(e["docs3"])
    def parts(name):
        e = by[name]
        info = items(e["info"])[0]
        docs = mapv(mapv(e["docs"])[name]) if name in mapv(e["docs"]) else None
        return info, docs
    out = [
        "//! The built-in command specs: every command and subcommand of %s, generated by"
        % [v.replace("_version:", " ") for v in cap["server"]][-1],
        "//! `tests/vectors/gen_specs.py` from its `COMMAND INFO` and `COMMAND DOCS` replies",
        "//! (`tests/vectors/%s`). Do not edit by hand: change the generator and run it again\n//! (rustfmt skips this file: `lib.rs`)."
        % src.split("/")[-1],
        "",
                "use crate::spec::{AclCategories as A, ArgFlags as AF, ArgType as T, DocFlags as D, KeyFlags as K};",
        "use crate::spec::{Arg, BeginSearch, CommandDoc, CommandFlags as F, CommandKind, CommandSpec, FindKeys, KeySpec, KeysProc};",
        "",
    ]
    tops = sorted(n for n in by if "|" not in n)

    def subs_of(name):
        # In the order the server lists them (its dict order), which COMMAND INFO and
        # COMMAND DOCS keep.
        info, _ = parts(name)
        order = [s[1][0][1] for s in items(info[1][9])]
        assert sorted(order) == sorted(n for n in by if n.startswith(name + "|")), name
        return order

    for name in tops:
        subs = subs_of(name)
        const = name.upper().replace("-", "_")
        if subs:
            out.append("static %s_SUBCOMMANDS: &[CommandSpec] = &[" % const)
            for s in subs:
                info, docs = parts(s)
                out.append("    " + spec(s, info, docs, "&[]", 1) + ",")
            out.append("];")
            out.append("")
    out.append("/// Every built-in command, sorted by name.")
    out.append("pub static BUILTIN: &[CommandSpec] = &[")
    for name in tops:
        subs = subs_of(name)
        const = name.upper().replace("-", "_")
        info, docs = parts(name)
        out.append("    " + spec(name, info, docs, ("%s_SUBCOMMANDS" % const) if subs else "&[]", 1) + ",")
    out.append("];")
    open(dst, "w").write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
