//! The aclfile (Valkey `ACLLoadFromFile`, `ACLSaveToFile`): one `user <name> <rules...>`
//! line per user, arguments split at single spaces.

use crate::rules::{merge_selectors, User, Users};
use std::collections::BTreeMap;

/// Why an aclfile was refused: Valkey's error text, each problem as
/// `<file>:<line>: <reason>. `, then `WARNING: ACL errors detected, no change to the
/// previously active ACL rules was performed`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FileError(pub String);

impl Users {
    /// Parses an aclfile's text (`file` names it in errors). A file without a `default`
    /// user gets the fresh default user, as Valkey does.
    ///
    /// # Errors
    /// [`FileError`] listing every bad line with its number and reason.
    pub fn load_file(text: &str, file: &str) -> Result<Users, FileError> {
        let mut users: BTreeMap<Vec<u8>, User> = BTreeMap::new();
        let mut errors = String::new();
        for (i, line) in text.split('\n').enumerate() {
            let n = i + 1;
            let line = line.trim_matches(|c| matches!(c, ' ' | '\t' | '\r' | '\n'));
            if line.is_empty() {
                continue;
            }
            let argv: Vec<&str> = line.split(' ').filter(|a| !a.is_empty()).collect();
            if argv.len() < 2 || argv[0] != "user" {
                errors.push_str(&format!(
                    "{file}:{n} should start with user keyword followed by the username. "
                ));
                continue;
            }
            let name = argv[1].as_bytes();
            if name.contains(&0) {
                errors.push_str(&format!(
                    "'{file}:{n}: username '{}' contains invalid characters. ",
                    argv[1]
                ));
                continue;
            }
            if users.contains_key(name) {
                errors.push_str(&format!(
                    "WARNING: Duplicate user '{}' found on line {n}. ",
                    argv[1]
                ));
                continue;
            }
            let mut u = User::new(name);
            let ops = match merge_selectors(&argv[2..]) {
                Ok(o) => o,
                Err(_) => {
                    errors.push_str(&format!(
                        "{file}:{n}: Unmatched parenthesis in selector definition."
                    ));
                    continue;
                }
            };
            let mut syntax_reported = false;
            for op in &ops {
                if let Err(e) = u.apply(op) {
                    if e == crate::RuleError::UnknownCommand {
                        errors.push_str(&format!(
                            "{file}:{n}: Error in applying operation '{}': {e}. ",
                            String::from_utf8_lossy(op)
                        ));
                    } else if !syntax_reported {
                        errors.push_str(&format!("{file}:{n}: {e}. "));
                        syntax_reported = true;
                    }
                }
            }
            users.insert(name.to_vec(), u);
        }
        if !errors.is_empty() {
            errors.push_str(
                "WARNING: ACL errors detected, no change to the previously active ACL rules was performed",
            );
            return Err(FileError(errors));
        }
        users
            .entry(b"default".to_vec())
            .or_insert_with(User::default_user);
        Ok(Users::from_map(users))
    }
}
