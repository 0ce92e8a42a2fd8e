//! Ed25519 signatures embedded in a component (the `wasmsign2` format: a
//! `signature` custom section first, over the hash of every section after
//! it), the operator's key files, and the trust store
//! (`$LONGHAND_HOME/trust/<signer>.pub`).
//!
//! A signer is named by its public key: `ed25519:<64 hex digits>`. The
//! name is the key, so a record that says who signed a component can be
//! checked against the trust store without anything else to look up.
//!
//! What it must not do: decide what is accepted. It says who signed (or
//! that nobody did, or nobody trusted); the installer and the store's
//! resolver decide what that means.

use std::io::{Cursor, Write};
use std::path::{Path, PathBuf};

use wasmsign2::{KeyPair, PublicKey, SecretKey};

use super::error::DistError;

/// Largest key file read, in bytes (a PEM key is under 200).
const MAX_KEY_FILE_BYTES: u64 = 16 << 10;

/// Who signed a component, as far as the trust store is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signature {
    /// No signature section.
    Unsigned,
    /// A valid signature by this trusted signer (`ed25519:<hex>`).
    Trusted(String),
    /// Signed, but by no key in the trust store, or not validly (bytes
    /// changed after signing).
    Untrusted,
}

/// `ed25519:<hex>` of a public key.
pub fn signer_of(pk: &PublicKey) -> String {
    let bytes = pk.to_bytes();
    // The first byte is wasmsign2's key-type tag (Ed25519).
    format!(
        "ed25519:{}",
        hex::encode(bytes.get(1..).unwrap_or_default())
    )
}

/// Write a new key pair: the secret key to `secret` (mode 0600, refused
/// if the file exists) and the public key to `secret` + `.pub`. Returns
/// the signer name and the public key's path.
pub fn keygen(secret: &Path) -> Result<(String, PathBuf), DistError> {
    let public = pub_path(secret);
    for path in [secret, public.as_path()] {
        if path.exists() {
            return Err(DistError::Usage(format!(
                "{} exists; keygen does not overwrite a key (remove it or choose another path)",
                path.display()
            )));
        }
    }
    let pair = KeyPair::generate();
    write_new(secret, pair.sk.to_pem().as_bytes(), 0o600)?;
    write_new(&public, pair.pk.to_pem().as_bytes(), 0o644)?;
    Ok((signer_of(&pair.pk), public))
}

/// `KEY.pub` beside `KEY`.
fn pub_path(secret: &Path) -> PathBuf {
    let mut name = secret.as_os_str().to_owned();
    name.push(".pub");
    PathBuf::from(name)
}

fn write_new(path: &Path, bytes: &[u8], mode: u32) -> Result<(), DistError> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(mode);
    }
    #[cfg(not(unix))]
    let _ = mode;
    let mut file = options
        .open(path)
        .map_err(DistError::io(format!("creating {}", path.display())))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(DistError::io(format!("writing {}", path.display())))
}

fn read_key_file(path: &Path) -> Result<Vec<u8>, DistError> {
    super::file::read_regular(path, MAX_KEY_FILE_BYTES, "a key file")
}

/// The secret key in `path` (written by [`keygen`]). A secret key file that
/// others may read is refused: it signs for whoever trusts it.
pub fn read_secret(path: &Path) -> Result<SecretKey, DistError> {
    let bytes = read_key_file(path)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(path)
            .map_err(DistError::io(format!("reading {}", path.display())))?;
        if meta.permissions().mode() & 0o077 != 0 {
            return Err(DistError::Usage(format!(
                "{} may be read by others (mode {:o}); `chmod 600` it first",
                path.display(),
                meta.permissions().mode() & 0o777
            )));
        }
    }
    SecretKey::from_any(&bytes).map_err(|e| {
        DistError::Usage(format!(
            "{} is not an Ed25519 secret key ({e}); make one with `longhand tool keygen`",
            path.display()
        ))
    })
}

/// The public key in `path` (a `.pub` from [`keygen`]).
pub fn read_public(path: &Path) -> Result<PublicKey, DistError> {
    let bytes = read_key_file(path)?;
    PublicKey::from_any(&bytes).map_err(|e| {
        DistError::Usage(format!(
            "{} is not an Ed25519 public key ({e}); give the KEY.pub that `longhand tool keygen` wrote",
            path.display()
        ))
    })
}

/// `bytes` with an embedded signature by `key` (any earlier signature is
/// replaced). The digest of the result is what gets published.
pub fn sign(bytes: &[u8], key: &SecretKey) -> Result<Vec<u8>, DistError> {
    let module = wasmsign2::Module::deserialize(&mut Cursor::new(bytes)).map_err(|e| {
        DistError::Usage(format!("cannot sign it: not a WebAssembly component ({e})"))
    })?;
    let signed = key
        .sign(module, None)
        .map_err(|e| DistError::Usage(format!("signing failed: {e}")))?;
    let mut out = Vec::with_capacity(bytes.len() + 256);
    signed
        .serialize(&mut out)
        .map_err(|e| DistError::Usage(format!("signing failed: {e}")))?;
    Ok(out)
}

/// Who signed `bytes`, judged against `trusted`.
pub fn check(bytes: &[u8], trusted: &[PublicKey]) -> Signature {
    let signed = wasmsign2::signature_info_from_reader(&mut Cursor::new(bytes), None)
        .is_ok_and(|info| info.is_signed());
    if !signed {
        return Signature::Unsigned;
    }
    for pk in trusted {
        if pk.verify(&mut Cursor::new(bytes), None).is_ok() {
            return Signature::Trusted(signer_of(pk));
        }
    }
    Signature::Untrusted
}

/// What a trusted key's seal is for.
const TRUST_DOMAIN: &str = "longhand trusted key v1";

/// The trust store: one `.pub` per trusted signer under `dir`, each with a
/// `.seal` beside it when the store is sealed ([`TrustStore::sealed`]).
#[derive(Debug, Clone)]
pub struct TrustStore {
    dir: PathBuf,
    seal: Sealing,
}

/// Whether what a store reads must carry the host key's seal.
#[derive(Debug, Clone)]
pub enum Sealing {
    /// No seals written or checked (a library host without a key).
    Off,
    /// Seals written with, and checked against, this key.
    On(longhand_hands::seal::HostKey),
    /// The host key could not be read or made: nothing sealed is trusted,
    /// and the reason is every read's error.
    Broken(String),
}

impl Sealing {
    /// The CLI's: sealed with the host key at `path`, or broken saying why.
    pub fn with_key_at(path: Option<&Path>) -> Self {
        match path {
            None => Self::Broken(
                "there is no host key (no cache directory: set LONGHAND_HOME or \
                 LONGHAND_KEY_DIR)"
                    .to_owned(),
            ),
            Some(path) => match longhand_hands::seal::HostKey::open_or_create(path) {
                Ok(key) => Self::On(key),
                Err(e) => Self::Broken(e.to_string()),
            },
        }
    }

    /// The key, or `None` when sealing is off; an error when it is broken.
    pub(crate) fn key(&self) -> Result<Option<&longhand_hands::seal::HostKey>, DistError> {
        match self {
            Self::Off => Ok(None),
            Self::On(key) => Ok(Some(key)),
            Self::Broken(why) => Err(DistError::Refused(format!(
                "the host key that seals the install and trust stores is unusable: {why}"
            ))),
        }
    }
}

impl TrustStore {
    /// The store in `dir` (created on the first [`TrustStore::add`]),
    /// unsealed.
    pub fn new(dir: PathBuf) -> Self {
        Self {
            dir,
            seal: Sealing::Off,
        }
    }

    /// The same store, each key sealed on `add` and checked on read: a
    /// key file `trust add` did not write on this host (planted by a tool
    /// granted the home) trusts nobody.
    pub fn sealed(mut self, seal: Sealing) -> Self {
        self.seal = seal;
        self
    }

    /// The `.seal` beside a key file.
    fn seal_path(key_file: &Path) -> PathBuf {
        key_file.with_extension("seal")
    }

    /// Trust the public key in `path`; returns its signer name. Adding a
    /// key already trusted is not an error. The store's directory is made
    /// 0700 and the key file 0600: only this user may change whom the
    /// host trusts.
    pub fn add(&self, path: &Path) -> Result<String, DistError> {
        let pk = read_public(path)?;
        let signer = signer_of(&pk);
        longhand_hands::seal::private_dir(&self.dir)
            .map_err(DistError::io(format!("creating {}", self.dir.display())))?;
        self.check_dir()?;
        let file = self.dir.join(format!("{}.pub", file_stem(&signer)));
        let key = self.seal.key()?;
        // The seal first: a crash between the two leaves a seal without a
        // key (nothing trusted), never a key without its seal.
        if let Some(key) = key {
            let seal = hex::encode(key.seal(TRUST_DOMAIN, &[signer.as_bytes()]));
            self.write_private(&Self::seal_path(&file), seal.as_bytes())?;
        }
        self.write_private(&file, pk.to_pem().as_bytes())?;
        Ok(signer)
    }

    /// Write `bytes` to `path` in the store, mode 0600, atomically.
    fn write_private(&self, path: &Path, bytes: &[u8]) -> Result<(), DistError> {
        let tmp = self.dir.join(format!(".tmp-{}", std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        write_new(&tmp, bytes, 0o600)?;
        std::fs::rename(&tmp, path).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            DistError::io(format!("writing {}", path.display()))(e)
        })
    }

    /// The store's directory must be this user's and writable by nobody
    /// else, and not a symlink: whoever can write it decides whom the host
    /// trusts.
    fn check_dir(&self) -> Result<(), DistError> {
        let refuse = |why: String| {
            DistError::Refused(format!(
                "the trust store {} is not trusted: {why}. Nothing it holds is trusted until \
                 it is fixed; check every key in it (`longhand trust list`) afterwards",
                self.dir.display()
            ))
        };
        let meta = std::fs::symlink_metadata(&self.dir)
            .map_err(DistError::io(format!("reading {}", self.dir.display())))?;
        if meta.file_type().is_symlink() {
            return Err(refuse(
                "it is a symbolic link; make it a directory of its own (`mkdir -m 700`) and \
                 `longhand trust add` each key again"
                    .to_owned(),
            ));
        }
        longhand_hands::seal::check_dir(&self.dir).map_err(refuse)
    }

    /// Every trusted key. The store's directory and each key file must be
    /// this user's, writable by nobody else, and not symbolic links; one
    /// that is not refuses the whole store (a key someone else could have
    /// planted trusts nobody). A file that is not a key is skipped with a
    /// warning (it trusts nobody).
    pub fn keys(&self) -> Result<Vec<PublicKey>, DistError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(DistError::io(format!("reading {}", self.dir.display()))(e)),
        };
        self.check_dir()?;
        let seal = self.seal.key()?;
        let mut keys = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "pub") {
                check_key_file(&path)?;
                let pk = match read_public(&path) {
                    Ok(pk) => pk,
                    Err(e) => {
                        tracing::warn!(path = %path.display(), %e, "not a trusted key");
                        continue;
                    }
                };
                if let Some(key) = seal
                    && !self.sealed_by(key, &path, &signer_of(&pk))
                {
                    tracing::warn!(
                        path = %path.display(),
                        "not a trusted key: `longhand trust add` did not write it on this host \
                         (no valid seal beside it); if you do trust it, `longhand trust add` it"
                    );
                    continue;
                }
                keys.push(pk);
            }
        }
        Ok(keys)
    }

    /// Whether the `.seal` beside `path` is this host's seal of `signer`.
    fn sealed_by(&self, key: &longhand_hands::seal::HostKey, path: &Path, signer: &str) -> bool {
        let seal_path = Self::seal_path(path);
        let Ok(text) = super::file::read_regular(&seal_path, 256, "a seal") else {
            return false;
        };
        let Ok(seal) = hex::decode(text.trim_ascii()) else {
            return false;
        };
        key.verify(TRUST_DOMAIN, &[signer.as_bytes()], &seal)
    }
}

/// A trusted key file: a regular file (not a symlink) of this user's that
/// nobody else may write.
fn check_key_file(path: &Path) -> Result<(), DistError> {
    let meta = std::fs::symlink_metadata(path)
        .map_err(DistError::io(format!("reading {}", path.display())))?;
    let refuse = |why: String| {
        DistError::Refused(format!(
            "trusted key {} is refused: {why}. Remove it, and `longhand trust add` the \
             publisher's KEY.pub if you do trust them",
            path.display()
        ))
    };
    if meta.file_type().is_symlink() {
        return Err(refuse("it is a symbolic link".to_owned()));
    }
    if !meta.is_file() {
        return Err(refuse("it is not a regular file".to_owned()));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if longhand_hands::seal::effective_uid().is_some_and(|uid| uid != meta.uid()) {
            return Err(refuse(format!(
                "it belongs to uid {}, not to you",
                meta.uid()
            )));
        }
        if meta.mode() & 0o022 != 0 {
            return Err(refuse(format!(
                "others may write it (mode {:o}); if it is the key you added, `chmod 600 {}`",
                meta.mode() & 0o777,
                path.display()
            )));
        }
    }
    Ok(())
}

/// A signer name as a file name (`ed25519-<hex>`).
fn file_stem(signer: &str) -> String {
    signer.replace(':', "-")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest component: the header alone.
    const EMPTY_COMPONENT: &[u8] = &[0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];

    #[test]
    fn a_signature_is_trusted_only_by_its_key_and_only_over_the_same_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("key");
        let (signer, public) = keygen(&secret).unwrap();
        assert!(
            signer.starts_with("ed25519:") && signer.len() == 8 + 64,
            "{signer}"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&secret).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert!(matches!(keygen(&secret), Err(DistError::Usage(_))));
        let signed = sign(EMPTY_COMPONENT, &read_secret(&secret).unwrap()).unwrap();
        assert_eq!(check(EMPTY_COMPONENT, &[]), Signature::Unsigned);
        assert_eq!(check(&signed, &[]), Signature::Untrusted);
        let trust = TrustStore::new(dir.path().join("trust"));
        assert_eq!(trust.add(&public).unwrap(), signer);
        let keys = trust.keys().unwrap();
        assert_eq!(check(&signed, &keys), Signature::Trusted(signer));
        // A byte appended after signing: the signature no longer covers it.
        let mut changed = signed.clone();
        changed.extend_from_slice(&[0, 1, b'x']);
        assert_eq!(check(&changed, &keys), Signature::Untrusted);
        // Another key signs; ours does not vouch for it.
        let other = dir.path().join("other");
        keygen(&other).unwrap();
        let by_other = sign(EMPTY_COMPONENT, &read_secret(&other).unwrap()).unwrap();
        assert_eq!(check(&by_other, &keys), Signature::Untrusted);
    }
}
