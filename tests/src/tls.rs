//! A certificate authority of the test's own, and a server certificate it signed: for the
//! TLS endpoints the suites run (an `https://` app in front of the platform, PostgreSQL
//! with `ssl=on`), which the client under test is told to trust through a CA file.

/// A CA and one server certificate signed by it.
pub struct TestCa {
    /// The CA's certificate, PEM: the file a client trusts.
    pub ca_pem: String,
    /// The server's certificate (DER and PEM) and its PKCS #8 key (DER and PEM).
    pub cert_der: Vec<u8>,
    pub cert_pem: String,
    pub key_der: Vec<u8>,
    pub key_pem: String,
}

impl TestCa {
    /// A CA named `name`, and a certificate for `names` (host names, or IP addresses,
    /// which become IP address names).
    pub fn new(name: &str, names: &[&str]) -> TestCa {
        let ca_key = rcgen::KeyPair::generate().expect("a CA key");
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca.distinguished_name.push(rcgen::DnType::CommonName, name);
        let ca = ca.self_signed(&ca_key).expect("the CA certificate");
        let key = rcgen::KeyPair::generate().expect("a server key");
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let leaf = rcgen::CertificateParams::new(names)
            .expect("server certificate params")
            .signed_by(&key, &ca, &ca_key)
            .expect("the server certificate");
        TestCa {
            ca_pem: ca.pem(),
            cert_der: leaf.der().to_vec(),
            cert_pem: leaf.pem(),
            key_der: key.serialize_der(),
            key_pem: key.serialize_pem(),
        }
    }
}
