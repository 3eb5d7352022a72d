//! Command ids for the ACL bit sets: every row of the command crate's [`BUILTIN`] table
//! (containers and their subcommands) numbered once (Valkey `ACLGetCommandID`).

use ferrocluster_command::{AclCategories, CommandSpec, BUILTIN};
use std::collections::HashMap;
use std::sync::OnceLock;

pub(crate) struct Registry {
    /// Every row, in id order.
    pub specs: Vec<&'static CommandSpec>,
    /// Id by full name (`get`, `config|get`).
    by_name: HashMap<&'static str, usize>,
    /// The subcommand ids of a container.
    pub children: Vec<Vec<usize>>,
}

pub(crate) fn registry() -> &'static Registry {
    static R: OnceLock<Registry> = OnceLock::new();
    R.get_or_init(|| {
        let mut r = Registry {
            specs: Vec::new(),
            by_name: HashMap::new(),
            children: Vec::new(),
        };
        for top in BUILTIN {
            let id = r.specs.len();
            r.specs.push(top);
            r.by_name.insert(top.name, id);
            r.children.push(Vec::new());
            for sub in top.subcommands {
                let sid = r.specs.len();
                r.specs.push(sub);
                r.by_name.insert(sub.name, sid);
                r.children.push(Vec::new());
                r.children[id].push(sid);
            }
        }
        r
    })
}

impl Registry {
    pub fn len(&self) -> usize {
        self.specs.len()
    }

    pub fn id(&self, spec: &CommandSpec) -> Option<usize> {
        self.by_name.get(spec.name).copied()
    }
}

/// The table row an ACL rule names (Valkey `ACLLookupCommand`): `get` or `config|get`,
/// ASCII case-insensitive; `None` for an unknown name or more than one `|`.
pub fn lookup_command(name: &[u8]) -> Option<&'static CommandSpec> {
    if name.iter().filter(|&&b| b == b'|').count() > 1 {
        return None;
    }
    ferrocluster_command::builtin(name)
}

/// The category names `ACL CAT` lists, in Valkey's order (`keyspace`, `read`, ...),
/// without the `@`.
pub fn category_names() -> impl Iterator<Item = &'static str> {
    AclCategories::NAMES.iter().map(|(_, n)| &n[1..])
}

/// The category named `name` (without `@`, ASCII case-insensitive); `all` is not a
/// category here (the rules treat `+@all` / `-@all` themselves).
pub(crate) fn category(name: &[u8]) -> Option<AclCategories> {
    let name = std::str::from_utf8(name).ok()?;
    AclCategories::NAMES
        .iter()
        .find(|(_, n)| n[1..].eq_ignore_ascii_case(name))
        .map(|(c, _)| *c)
}

/// `ACL CAT <category>`: the full names of the commands and subcommands in the category
/// (Valkey `aclCatWithFlags`, table order; Valkey's own order is its dict's, so compare
/// as sets). `None` for an unknown category.
pub fn category_commands(name: &[u8]) -> Option<Vec<&'static str>> {
    let cat = category(name)?;
    Some(
        registry()
            .specs
            .iter()
            .filter(|s| s.acl.intersects(cat))
            .map(|s| s.name)
            .collect(),
    )
}
