//! The ACL rule parser (issue 24): the input, split at NUL bytes into a user name and rules
//! (each a byte string, so selectors `( ... )` and binary passwords come through), is applied
//! with `Users::set_user`; the same bytes as text go through the aclfile parser.
//!
//! Properties: no panic; a refused SETUSER changes nothing; an accepted one gives an
//! `ACL LIST` line of one line that, when every rule was UTF-8, the aclfile parser reads back
//! (a second reload giving the same text); the permission check of a few commands never panics.
#![no_main]

use ferrocluster_acl::Users;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut parts = data.split(|&b| b == 0);
    let name = parts.next().unwrap_or_default();
    let rules: Vec<&[u8]> = parts.collect();
    let mut users = Users::new();
    let before = users.clone();
    match users.set_user(name, &rules) {
        Err(_) => assert_eq!(users, before, "a refused SETUSER changes nothing"),
        Ok(()) => {
            let u = users.get(name).expect("the user exists");
            let line = u.describe();
            assert!(!line.contains('\n') && !line.contains('\r'), "{line:?}");
            let utf8 = std::str::from_utf8(name).is_ok_and(|n| !n.is_empty())
                && rules.iter().all(|r| std::str::from_utf8(r).is_ok());
            if utf8 {
                let back = Users::load_file(&users.to_file(), "fuzz.acl")
                    .unwrap_or_else(|e| panic!("{line:?} does not load back: {e}"));
                // One reload may normalise (`%RW~*` prints as `~*`, which reloads as
                // allkeys and drops the other patterns, as in Valkey); after it, a fixpoint.
                let again = Users::load_file(&back.to_file(), "fuzz.acl").expect("reloads");
                assert_eq!(again.to_file(), back.to_file());
            }
            for argv in [
                &[&b"get"[..], b"app:1"][..],
                &[b"set", b"k", b"v", b"GET"],
                &[b"publish", b"ch", b"m"],
                &[b"psubscribe", b"c*"],
                &[b"select", b"3"],
                &[b"client", b"id"],
                &[b"copy", b"a", b"b", b"DB", b"9"],
            ] {
                if let Ok(spec) = ferrocluster_command::resolve(argv) {
                    let _ = u.check(spec, argv, 1);
                }
            }
        }
    }
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(loaded) = Users::load_file(text, "fuzz.acl") {
            let again = Users::load_file(&loaded.to_file(), "fuzz.acl").expect("reloads");
            assert_eq!(again.to_file(), loaded.to_file());
        }
    }
});
