//! CLUSTER argv from the command table's grammar (`ferrocluster_command::cluster_subcommands`,
//! each subcommand's `COMMAND DOCS` argument tree), driven by fuzzer bytes: optional
//! arguments come or not, `multiple` ones repeat, a `oneof` takes one arm, tokens are written,
//! and leaves take values that matter to the node (node IDs it knows, slots in and around
//! 0..16383, small epochs, addresses of the scripted peers). A few argvs are then bent
//! (a word dropped, added or replaced by raw bytes) so the parser's error paths run too.

use ferrocluster_command::{cluster_subcommands, Arg, ArgFlags, ArgType};
use libfuzzer_sys::arbitrary::{Result, Unstructured};

/// Words a leaf may take besides its typed values.
const WORDS: &[&[u8]] = &[
    b"",
    b"0",
    b"-1",
    b"16383",
    b"16384",
    b"FORCE",
    b"TAKEOVER",
    b"HARD",
    b"SOFT",
    b"ORDERBY",
    b"SLOTSRANGE",
    b"NODE",
    b"STABLE",
    b"IMPORTING",
    b"MIGRATING",
    b"TIMEOUT",
    b"ESTABLISH",
    b"SNAPSHOT-EOF",
    b"REQUEST-PAUSE",
    b"PAUSED",
    b"REQUEST-FAILOVER",
    b"FAILOVER-GRANTED",
    b"ACK",
    b"FINISH",
    b"SOURCE",
    b"NAME",
    b"key-count",
    b"cpu-usec",
    b"LIMIT",
    b"DESC",
];

/// The values a leaf may take, from what the caller knows.
pub struct Vocab<'a> {
    /// Node IDs (40 hex characters) the node knows: myself's and the peers'.
    pub node_ids: &'a [String],
    /// `ip:port` (or `ip port` in two words for MEET) of the peers.
    pub peers: &'a [(String, u16)],
    /// Slot migration job names seen so far.
    pub jobs: &'a [String],
}

/// One CLUSTER argv (`argv[0]` is `CLUSTER`); most come from the grammar, a few are bent.
pub fn cluster_argv(u: &mut Unstructured, v: &Vocab) -> Result<Vec<Vec<u8>>> {
    let subs = cluster_subcommands();
    let sub = &subs[u.choose_index(subs.len())?];
    let mut argv = vec![b"CLUSTER".to_vec(), sub.short_name().as_bytes().to_vec()];
    if sub.short_name() == "syncslots" {
        syncslots_args(u, v, &mut argv)?;
    } else {
        for a in sub.doc.arguments {
            arg(u, v, a, &mut argv, 0)?;
        }
    }
    bend(u, &mut argv)?;
    Ok(argv)
}

/// SYNCSLOTS has no documented arguments (a SYSCMD container): its subcommands by hand,
/// from the slot migration sheet (`ESTABLISH SOURCE <id> NAME <job> SLOTSRANGE s e ...`, `FINISH STATE
/// success|failed NAME <job> [MESSAGE m]` and the one-word messages, as
/// `ferrocluster_migration::SyncSlots::argv` writes them).
fn syncslots_args(u: &mut Unstructured, v: &Vocab, argv: &mut Vec<Vec<u8>>) -> Result<()> {
    match u.int_in_range(0..=7u8)? {
        0 => {
            argv.push(b"ESTABLISH".to_vec());
            argv.push(b"SOURCE".to_vec());
            argv.push(node_id(u, v)?);
            argv.push(b"NAME".to_vec());
            argv.push(job(u, v)?);
            argv.push(b"SLOTSRANGE".to_vec());
            for _ in 0..u.int_in_range(1..=3u8)? {
                argv.push(slot(u)?);
                argv.push(slot(u)?);
            }
        }
        1 => argv.push(b"SNAPSHOT-EOF".to_vec()),
        2 => argv.push(b"REQUEST-PAUSE".to_vec()),
        3 => argv.push(b"PAUSED".to_vec()),
        4 => argv.push(b"REQUEST-FAILOVER".to_vec()),
        5 => argv.push(b"FAILOVER-GRANTED".to_vec()),
        6 => argv.push(b"ACK".to_vec()),
        _ => {
            argv.push(b"FINISH".to_vec());
            argv.push(b"STATE".to_vec());
            argv.push(if u.arbitrary()? {
                b"success".to_vec()
            } else {
                b"failed".to_vec()
            });
            argv.push(b"NAME".to_vec());
            argv.push(job(u, v)?);
            if u.arbitrary()? {
                argv.push(b"MESSAGE".to_vec());
                argv.push(bytes_upto(u, 8)?);
            }
        }
    }
    Ok(())
}

fn arg(u: &mut Unstructured, v: &Vocab, a: &Arg, argv: &mut Vec<Vec<u8>>, depth: u8) -> Result<()> {
    if a.flags.contains(ArgFlags::OPTIONAL) && !u.arbitrary::<bool>()? {
        return Ok(());
    }
    let times = if a.flags.contains(ArgFlags::MULTIPLE) && depth < 3 {
        u.int_in_range(1..=3u8)?
    } else {
        1
    };
    for i in 0..times {
        if let Some(t) = a.token {
            if i == 0 || a.flags.contains(ArgFlags::MULTIPLE_TOKEN) || a.kind == ArgType::PureToken
            {
                argv.push(t.as_bytes().to_vec());
            }
        }
        match a.kind {
            ArgType::PureToken => {}
            ArgType::Oneof if !a.arguments.is_empty() => {
                let arm = &a.arguments[u.choose_index(a.arguments.len())?];
                arg(u, v, arm, argv, depth + 1)?;
            }
            ArgType::Block | ArgType::Oneof => {
                for sub in a.arguments {
                    arg(u, v, sub, argv, depth + 1)?;
                }
            }
            _ => argv.push(leaf(u, v, a)?),
        }
    }
    Ok(())
}

/// A value for one leaf, by its name and type.
fn leaf(u: &mut Unstructured, v: &Vocab, a: &Arg) -> Result<Vec<u8>> {
    if u.ratio(1u8, 16)? {
        return Ok(WORDS[u.choose_index(WORDS.len())?].to_vec());
    }
    let name = a.name;
    if name.contains("node") || name.contains("id") {
        return node_id(u, v);
    }
    if name.contains("slot") {
        return slot(u);
    }
    if name == "ip" || name.contains("host") {
        return Ok(match v.peers.get(u.choose_index(v.peers.len().max(1))?) {
            Some((ip, _)) => ip.clone().into_bytes(),
            None => b"127.0.0.1".to_vec(),
        });
    }
    if name.contains("port") {
        return Ok(match v.peers.get(u.choose_index(v.peers.len().max(1))?) {
            Some((_, p)) if u.ratio(3u8, 4)? => p.to_string().into_bytes(),
            _ => number(u)?,
        });
    }
    match a.kind {
        ArgType::Integer | ArgType::UnixTime | ArgType::Double => number(u),
        _ => {
            let n = u.int_in_range(0..=12u8)?;
            Ok(u.bytes(usize::from(n))?.to_vec())
        }
    }
}

fn node_id(u: &mut Unstructured, v: &Vocab) -> Result<Vec<u8>> {
    if v.node_ids.is_empty() || u.ratio(1u8, 10)? {
        return Ok(format!("{:040x}", u.arbitrary::<u64>()?).into_bytes());
    }
    Ok(v.node_ids[u.choose_index(v.node_ids.len())?]
        .clone()
        .into_bytes())
}

fn job(u: &mut Unstructured, v: &Vocab) -> Result<Vec<u8>> {
    if v.jobs.is_empty() || u.ratio(1u8, 4)? {
        return Ok(format!("{:040x}", u.int_in_range(0..=3u8)?).into_bytes());
    }
    Ok(v.jobs[u.choose_index(v.jobs.len())?].clone().into_bytes())
}

/// A slot: mostly a few low slots (so commands meet each other), sometimes any, sometimes
/// out of range.
fn slot(u: &mut Unstructured) -> Result<Vec<u8>> {
    let s: i64 = match u.int_in_range(0..=9u8)? {
        0..=5 => i64::from(u.int_in_range(0..=7u16)?),
        6 | 7 => i64::from(u.int_in_range(0..=16383u16)?),
        8 => 16383,
        _ => i64::from(u.arbitrary::<i32>()?),
    };
    Ok(s.to_string().into_bytes())
}

fn number(u: &mut Unstructured) -> Result<Vec<u8>> {
    let n: i64 = match u.int_in_range(0..=3u8)? {
        0..=1 => i64::from(u.int_in_range(0..=10u8)?),
        2 => i64::from(u.arbitrary::<u16>()?),
        _ => u.arbitrary::<i64>()?,
    };
    Ok(n.to_string().into_bytes())
}

/// Bends one argv in eight: drops a word, adds one, or replaces one with raw bytes.
fn bend(u: &mut Unstructured, argv: &mut Vec<Vec<u8>>) -> Result<()> {
    if !u.ratio(1u8, 8)? {
        return Ok(());
    }
    let i = 1 + u.choose_index(argv.len() - 1)?;
    match u.int_in_range(0..=2u8)? {
        0 if argv.len() > 2 => {
            argv.remove(i);
        }
        1 => {
            let w = WORDS[u.choose_index(WORDS.len())?].to_vec();
            argv.insert(i, w);
        }
        _ => {
            let n = u.int_in_range(0..=8u8)?;
            argv[i] = u.bytes(usize::from(n))?.to_vec();
        }
    }
    Ok(())
}

/// Up to `max` bytes of the input.
pub fn bytes_upto(u: &mut Unstructured, max: usize) -> Result<Vec<u8>> {
    let n = u.int_in_range(0..=max)?;
    Ok(u.bytes(n)?.to_vec())
}
