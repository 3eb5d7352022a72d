//! Test certificates, made at test time with rcgen: a CA and node certificates it signs
//! (the one helper for every TLS test: the host kit's, the server's, the `tls_resp` fuzz target; Valkey's `utils/gen-test-certs.sh` makes the same
//! shape: one CA, a certificate per node usable as server and client).

use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};
use std::path::{Path, PathBuf};

/// A CA whose files live in `dir`: `ca.crt` (and its key, kept in memory).
pub struct TestCa {
    cert: Certificate,
    key: KeyPair,
    /// The directory of the CA's files.
    pub dir: PathBuf,
}

/// One node's files: PEM certificate, key, and the CA certificate that signed it.
pub struct NodeCert {
    /// The PEM certificate (`name.crt`).
    pub cert: PathBuf,
    /// Its PEM private key (`name.key`).
    pub key: PathBuf,
    /// The CA certificate that signed it (`ca.crt`).
    pub ca: PathBuf,
}

impl NodeCert {
    /// The `tls-*` flags for a server using these files.
    pub fn server_flags(&self) -> Vec<String> {
        vec![
            "--tls-cert-file".into(),
            self.cert.display().to_string(),
            "--tls-key-file".into(),
            self.key.display().to_string(),
            "--tls-ca-cert-file".into(),
            self.ca.display().to_string(),
        ]
    }

    /// redis-cli's `--tls --cacert --cert --key` arguments.
    pub fn cli_flags(&self) -> Vec<String> {
        vec![
            "--tls".into(),
            "--cacert".into(),
            self.ca.display().to_string(),
            "--cert".into(),
            self.cert.display().to_string(),
            "--key".into(),
            self.key.display().to_string(),
        ]
    }
}

impl TestCa {
    /// A new CA named `name`, its certificate written to `dir/ca.crt`.
    pub fn new(dir: &Path, name: &str) -> TestCa {
        std::fs::create_dir_all(dir).expect("create cert dir");
        let key = KeyPair::generate().expect("CA key");
        let mut p = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name
            .push(DnType::CommonName, format!("{name} Test CA"));
        let cert = p.self_signed(&key).expect("CA certificate");
        std::fs::write(dir.join("ca.crt"), cert.pem()).expect("write ca.crt");
        TestCa {
            cert,
            key,
            dir: dir.to_path_buf(),
        }
    }

    /// A certificate for `name` (server and client use; SANs 127.0.0.1 and localhost),
    /// written as `name.crt` / `name.key`.
    pub fn node(&self, name: &str) -> NodeCert {
        let key = KeyPair::generate().expect("node key");
        let mut p = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
            .expect("node params");
        p.distinguished_name.push(DnType::CommonName, name);
        p.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let cert = p
            .signed_by(&key, &self.cert, &self.key)
            .expect("node certificate");
        let out = NodeCert {
            cert: self.dir.join(format!("{name}.crt")),
            key: self.dir.join(format!("{name}.key")),
            ca: self.dir.join("ca.crt"),
        };
        std::fs::write(&out.cert, cert.pem()).expect("write cert");
        std::fs::write(&out.key, key.serialize_pem()).expect("write key");
        out
    }
}
