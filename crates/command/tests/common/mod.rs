//! Test support: captured cases from `vectors/<flavor>/text/index.json` and cluster models
//! built from the captured nodes.conf files.
#![allow(dead_code)]

use ferrocluster_slot::{Slot, SlotRange};
use ferrocluster_testvectors::{read, read_json};
use ferrocluster_topology::{Hostname, Millis, Node, NodeFlags, NodeId, ShardId, Topology};
use std::collections::{BTreeMap, BTreeSet};

/// One captured case: the connection's port, and its steps (args, reply bytes).
#[derive(Debug, Clone)]
pub struct Case {
    pub file: String,
    pub port: u16,
    pub steps: Vec<(Vec<Vec<u8>>, Vec<u8>)>,
    pub note: String,
}

fn unescape(s: &str) -> Vec<u8> {
    // The index writes replies with `\r`, `\n`, `\\` and `\xNN` escapes.
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 1 < b.len() {
            match b[i + 1] {
                b'r' => out.push(b'\r'),
                b'n' => out.push(b'\n'),
                b't' => out.push(b'\t'),
                b'\\' => out.push(b'\\'),
                b'x' if i + 3 < b.len() => {
                    out.push(u8::from_str_radix(&s[i + 2..i + 4], 16).expect("hex escape"));
                    i += 4;
                    continue;
                }
                other => {
                    out.push(b'\\');
                    out.push(other);
                }
            }
            i += 2;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

pub fn cases(flavor: &str) -> BTreeMap<String, Case> {
    let idx = read_json(format!("{flavor}/text/index.json"));
    let mut out = BTreeMap::new();
    for r in idx["replies"].as_array().expect("replies") {
        let file = r["file"].as_str().expect("file").to_owned();
        let steps = r["steps"]
            .as_array()
            .expect("steps")
            .iter()
            .map(|s| {
                let args = s["args"]
                    .as_array()
                    .expect("args")
                    .iter()
                    .map(|a| a.as_str().expect("arg").as_bytes().to_vec())
                    .collect();
                (args, unescape(s["reply"].as_str().expect("reply")))
            })
            .collect();
        let case = Case {
            port: r["port"].as_u64().expect("port") as u16,
            steps,
            note: r["note"].as_str().unwrap_or("").to_owned(),
            file: file.clone(),
        };
        out.insert(file, case);
    }
    out
}

/// The exact bytes of a case's last reply (`X.resp`).
pub fn resp(flavor: &str, file: &str) -> Vec<u8> {
    read(format!("{flavor}/text/{file}"))
}

/// A parsed nodes.conf line.
#[derive(Debug, Clone)]
pub struct ConfLine {
    pub id: NodeId,
    pub ip: String,
    pub port: u16,
    pub hostname: Option<String>,
    pub myself: bool,
    pub primary_flag: bool,
    pub fail: bool,
    pub primary: Option<NodeId>,
    pub slots: Vec<SlotRange>,
    pub importing: Vec<(Slot, NodeId)>,
    pub migrating: Vec<(Slot, NodeId)>,
}

pub fn parse_conf(text: &str) -> Vec<ConfLine> {
    let mut out = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        if f.len() < 8 || f[0] == "vars" {
            continue;
        }
        let id = NodeId::parse(f[0]).expect("node id");
        let (addr, rest) = f[1].split_once('@').expect("addr@cport");
        let (ip, port) = addr.rsplit_once(':').expect("ip:port");
        let hostname = rest
            .split(',')
            .nth(1)
            .filter(|h| !h.is_empty() && !h.contains('='))
            .map(str::to_owned);
        let flags: BTreeSet<&str> = f[2].split(',').collect();
        let mut slots = Vec::new();
        let mut importing = Vec::new();
        let mut migrating = Vec::new();
        for tok in &f[8..] {
            if let Some(inner) = tok.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
                if let Some((s, n)) = inner.split_once("->-") {
                    migrating.push((Slot::parse(s).unwrap(), NodeId::parse(n).unwrap()));
                } else if let Some((s, n)) = inner.split_once("-<-") {
                    importing.push((Slot::parse(s).unwrap(), NodeId::parse(n).unwrap()));
                }
            } else if !tok.is_empty() {
                slots.push(SlotRange::parse(tok).expect("slot range"));
            }
        }
        out.push(ConfLine {
            id,
            ip: ip.to_owned(),
            port: port.parse().expect("port"),
            hostname,
            myself: flags.contains("myself"),
            primary_flag: flags.contains("master"),
            fail: flags.contains("fail"),
            primary: (f[3] != "-").then(|| NodeId::parse(f[3]).expect("primary id")),
            slots,
            importing,
            migrating,
        });
    }
    out
}

fn node_of(l: &ConfLine) -> Node {
    let mut n = Node::new(
        l.id,
        ShardId::from_bytes(l.id.as_bytes()).unwrap(),
        Millis(0),
    );
    n.flags = if l.primary_flag {
        NodeFlags::PRIMARY
    } else {
        NodeFlags::REPLICA
    };
    if l.fail {
        n.flags.insert(NodeFlags::FAIL);
    }
    n.ip = Some(l.ip.parse().expect("ip"));
    n.port = l.port;
    n.bus_port = l.port + 10000;
    n.hostname = l
        .hostname
        .as_deref()
        .map(|h| Hostname::new(h).expect("hostname"));
    n
}

/// The model a node had at a captured moment: `nodes-conf/<moment>/nodes-<port>.conf`.
pub fn topology(flavor: &str, moment: &str, port: u16) -> Topology {
    let text = String::from_utf8(read(format!(
        "{flavor}/text/nodes-conf/{moment}/nodes-{port}.conf"
    )))
    .expect("utf8");
    let lines = parse_conf(&text);
    let me = lines.iter().find(|l| l.myself).expect("myself line");
    let mut t = Topology::new(node_of(me));
    for l in lines.iter().filter(|l| !l.myself) {
        t.add_node(node_of(l)).expect("add node");
    }
    for l in &lines {
        if let Some(p) = l.primary {
            t.set_primary(&l.id, p).expect("set primary");
        }
        for r in &l.slots {
            for s in r.iter() {
                t.set_slot_owner(s, Some(l.id)).expect("owner");
            }
        }
    }
    for (s, n) in &me.importing {
        t.set_importing(*s, Some(*n)).expect("importing");
    }
    for (s, n) in &me.migrating {
        t.set_migrating(*s, Some(*n)).expect("migrating");
    }
    t
}
