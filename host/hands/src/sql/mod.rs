//! `longhand:tool/sql`: databases the operator granted by name, reached
//! through a connection the host holds.
//!
//! The guest names a database (`app`); the host has its URL (read from an
//! environment variable when the grant was resolved, see [`grant`]),
//! checks where it points against the same address rules as a guest's
//! HTTP, connects with TLS as `sslmode` asks ([`longhand_pgtls`]), and runs
//! the statement. Read-only is the server's own rule, not a keyword filter:
//!
//! - **`query`** opens a `READ ONLY` transaction and takes its snapshot at
//!   once (so `SET TRANSACTION READ WRITE` is too late), sets
//!   `statement_timeout` to what is left of the call, and prepares the
//!   statement with the extended protocol: the server parses exactly one
//!   statement (two are refused by the server) and binds parameters, never
//!   splicing them into SQL. A statement the server describes as returning
//!   no rows (`COPY`, `DO`, `SET`, `COMMIT`, `CALL` without results) is
//!   refused before it runs: `query` is for reading rows. Rows are fetched
//!   through a portal in batches, so a huge result costs the server only
//!   what was asked for; past `max-rows` or the byte cap the rest are
//!   counted, for a bounded time, and left out. Then the transaction is
//!   rolled back. The session's settings default to read-only as well
//!   (`default_transaction_read_only`) on a read-only grant.
//! - **`execute`** exists only on a `mode=rw` grant: one statement in its
//!   own read-write transaction with the same timeout, committed when it
//!   succeeds.
//! - **Secrets.** No URL, user, password or address reaches the guest:
//!   connection failures are told by kind (credentials refused, database
//!   missing, server unreachable, TLS), never with the driver's or the
//!   server's words; statement errors are the server's message with the
//!   password and the URL redacted ([`crate::redact`]) and the user's name
//!   replaced. Text values coming back are redacted the same way.
//!
//! Connections are kept for reuse (a few per database), and a connection
//! goes back only after `DISCARD ALL`, so nothing a statement set — a
//! role, a setting, a temporary table, an advisory lock — outlives its call.

pub mod grant;
mod values;

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_postgres::{Client, Statement, Transaction};

use crate::bindings::longhand::tool::sql::{
    Changes, Column, Index, Rows, Table, TableColumn, Value,
};
use crate::bindings::longhand::tool::types::{Denied, ToolError};
use crate::grants::Grants;
use crate::receipt::Journal;
use crate::redact::Redactor;

pub use grant::{DatabaseGrant, DatabaseMode};

/// How long before the call's deadline a statement is stopped, so the
/// component still gets its answer.
const MARGIN: Duration = Duration::from_millis(250);
/// The longest a connection may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Rows fetched from the portal at a time, at most.
const BATCH: i32 = 500;
/// Bytes of rows one fetch aims at: what the host holds of a result at
/// once beyond the rows it keeps (one row bigger than this is fetched
/// alone; PostgreSQL's own limit on a value is 1 GB).
const BATCH_BYTES: usize = 1 << 20;
/// After the caps, rows still counted (not kept) at most, and for at most
/// this long: past either the count is reported as inexact.
const COUNT_ROWS: u64 = 100_000;
const COUNT_TIME: Duration = Duration::from_secs(1);
/// Bytes a value is taken to cost beyond its own (for the byte cap).
const VALUE_OVERHEAD: usize = 8;
/// Idle connections kept per database, and how long one may idle.
const IDLE_PER_DATABASE: usize = 4;
const IDLE_FOR: Duration = Duration::from_secs(300);

/// What one call may reach: built from its grants when the call starts.
pub(crate) struct SqlGrant {
    databases: Vec<DatabaseGrant>,
    /// The call's deadline; a statement ends [`MARGIN`] before it.
    deadline: Instant,
    /// Bytes of row data one `query` may return.
    max_bytes: usize,
}

impl SqlGrant {
    pub(crate) fn new(grants: &Grants) -> Self {
        Self {
            databases: grants.databases.clone(),
            deadline: Instant::now() + grants.limits.timeout,
            max_bytes: usize::try_from(grants.limits.max_output_bytes).unwrap_or(usize::MAX),
        }
    }
}

/// What a guest asked for.
enum Ask<'a> {
    Query {
        statement: &'a str,
        params: &'a [Value],
        max_rows: u32,
    },
    Execute {
        statement: &'a str,
        params: &'a [Value],
    },
    Schema,
}

/// What came back.
enum Answer {
    Rows(Rows),
    Changes(Changes),
    Tables(Vec<Table>),
}

pub(crate) async fn query(
    grant: Option<Arc<SqlGrant>>,
    journal: Arc<Mutex<Journal>>,
    database: String,
    statement: String,
    params: Vec<Value>,
    max_rows: u32,
) -> Result<Rows, ToolError> {
    let ask = Ask::Query {
        statement: &statement,
        params: &params,
        max_rows,
    };
    match run(grant, &journal, &database, ask).await? {
        Answer::Rows(rows) => Ok(rows),
        _ => unreachable!("a query answers rows"),
    }
}

pub(crate) async fn execute(
    grant: Option<Arc<SqlGrant>>,
    journal: Arc<Mutex<Journal>>,
    database: String,
    statement: String,
    params: Vec<Value>,
) -> Result<Changes, ToolError> {
    let ask = Ask::Execute {
        statement: &statement,
        params: &params,
    };
    match run(grant, &journal, &database, ask).await? {
        Answer::Changes(changes) => Ok(changes),
        _ => unreachable!("an execute answers changes"),
    }
}

pub(crate) async fn schema(
    grant: Option<Arc<SqlGrant>>,
    journal: Arc<Mutex<Journal>>,
    database: String,
) -> Result<Vec<Table>, ToolError> {
    match run(grant, &journal, &database, Ask::Schema).await? {
        Answer::Tables(tables) => Ok(tables),
        _ => unreachable!("a schema answers tables"),
    }
}

/// Find the grant, connect, run, and give the connection back clean.
async fn run(
    grant: Option<Arc<SqlGrant>>,
    journal: &Arc<Mutex<Journal>>,
    database: &str,
    ask: Ask<'_>,
) -> Result<Answer, ToolError> {
    let record = |f: &dyn Fn(&mut Journal)| {
        if let Ok(mut j) = journal.lock() {
            f(&mut j);
        }
    };
    let deny = |reason: String| {
        record(&|j| {
            j.deny(
                "database",
                crate::bound::cut(database.to_owned(), 64),
                reason.clone(),
            )
        });
        ToolError::AccessDenied(Denied {
            resource: crate::bound::cut(database.to_owned(), 64),
            reason,
        })
    };
    let Some(grant) = grant else {
        return Err(deny("no database is granted to this tool".into()));
    };
    let Some(db) = grant.databases.iter().find(|d| d.name == database) else {
        let names: Vec<&str> = grant.databases.iter().map(|d| d.name.as_str()).collect();
        return Err(deny(format!(
            "no database named `{}` is granted; granted: {}",
            crate::bound::visible(database, 64),
            names.join(", ")
        )));
    };
    if matches!(ask, Ask::Execute { .. }) && db.mode != DatabaseMode::ReadWrite {
        return Err(deny(format!(
            "database `{}` is granted read-only: `execute` needs the grant `{}={},mode=rw`; \
             use `query` to read",
            db.name, db.name, db.var
        )));
    }
    let redactor = redactor(db);
    let deadline = grant.deadline.checked_sub(MARGIN).unwrap_or(grant.deadline);
    let left = || deadline.saturating_duration_since(Instant::now());
    if left().is_zero() {
        return Err(ToolError::Failed(
            "the call has no time left to run a statement".into(),
        ));
    }
    let started = Instant::now();
    let mut client = match POOL.take(db) {
        Some(client) => client,
        None => connect(db, left(), journal).await?,
    };
    let outcome = tokio::time::timeout(left(), on(&mut client, db, &ask, &grant, left())).await;
    let answer = match outcome {
        Ok(Ok(answer)) => {
            POOL.give_back(db, client);
            answer
        }
        Ok(Err(err)) => {
            // A failed statement leaves the transaction to roll back; a
            // connection in any doubt is closed, not reused.
            if !client.is_closed() && err.is_statement() {
                POOL.give_back(db, client);
            }
            return Err(err.into_tool_error(db, &redactor));
        }
        Err(_) => {
            // The server stops it too: statement_timeout was set to this.
            let cancel = client.cancel_token();
            let tls = longhand_pgtls::connector(&mut db.config(), &db.tls).ok();
            if let Some(tls) = tls {
                tokio::spawn(async move {
                    let _ = cancel.cancel_query(tls).await;
                });
            }
            return Err(ToolError::Failed(format!(
                "the statement ran past the call's time limit ({} ms) and was cancelled; \
                 narrow it (WHERE, LIMIT) or ask the operator for a longer timeout",
                started.elapsed().as_millis()
            )));
        }
    };
    let detail = match &answer {
        Answer::Rows(r) => format!(
            "query: {} rows{} in {} ms",
            r.rows.len(),
            if r.truncated_rows > 0 {
                format!(", {} more left out", r.truncated_rows)
            } else {
                String::new()
            },
            started.elapsed().as_millis()
        ),
        Answer::Changes(c) => format!("execute: {} rows changed", c.changes),
        Answer::Tables(t) => format!("schema: {} tables", t.len()),
    };
    record(&|j| j.use_cap("database", db.name.clone(), detail.clone()));
    Ok(redact_answer(answer, &redactor))
}

/// The redactor for what a database can reflect: its password and its URL.
fn redactor(db: &DatabaseGrant) -> Option<Arc<Redactor>> {
    let user = db.config().get_user().map(str::to_owned);
    let hidden: Vec<&str> = db
        .hidden
        .iter()
        .map(String::as_str)
        .filter(|h| Some(*h) != user.as_deref())
        .collect();
    Redactor::shared(&hidden).ok()
}

/// `text` with the password and URL redacted and the user's quoted name
/// replaced; `None` redactor: nothing can be shown, so nothing is.
fn scrub(text: &str, db: &DatabaseGrant, redactor: &Option<Arc<Redactor>>) -> String {
    let Some(redactor) = redactor else {
        return "(the server's message is withheld: it could not be checked for the \
                database's credentials)"
            .into();
    };
    let (bytes, _) = redactor.redact(text.as_bytes());
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    if let Some(user) = db.config().get_user().filter(|u| !u.is_empty()) {
        text = text.replace(&format!("\"{user}\""), "\"[the granted user]\"");
    }
    text
}

fn redact_answer(answer: Answer, redactor: &Option<Arc<Redactor>>) -> Answer {
    let Answer::Rows(mut rows) = answer else {
        return answer;
    };
    let Some(redactor) = redactor else {
        return Answer::Rows(rows);
    };
    for value in rows.rows.iter_mut().flatten() {
        if let Value::Text(t) = value
            && !redactor.find(t.as_bytes()).spans.is_empty()
        {
            let (bytes, _) = redactor.redact(t.as_bytes());
            *t = String::from_utf8_lossy(&bytes).into_owned();
        }
    }
    Answer::Rows(rows)
}

/// Open a connection to `db`'s server: its address checked, pinned and
/// connected to with TLS as its URL asks.
async fn connect(
    db: &DatabaseGrant,
    left: Duration,
    journal: &Arc<Mutex<Journal>>,
) -> Result<Client, ToolError> {
    let unreachable =
        |why: &str| ToolError::Failed(format!("cannot connect to database `{}`: {why}", db.name));
    let mut config = db.config();
    let Some(tokio_postgres::config::Host::Tcp(host)) = config.get_hosts().first().cloned() else {
        return Err(unreachable("its URL names no TCP host"));
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let addrs = crate::net::resolve(&host, port)
        .await
        .map_err(|_| unreachable("the host in its URL does not resolve"))?;
    let host_is_localhost = host.eq_ignore_ascii_case("localhost");
    let mut refused = Vec::new();
    let allowed: Vec<SocketAddr> = addrs
        .into_iter()
        .filter(|a| match crate::addr::special(a.ip()) {
            None => true,
            Some(special) => {
                let named = db.names(a.ip(), port, host_is_localhost)
                    || db.names(special.judged, port, host_is_localhost);
                if !named {
                    refused.push(special.row.reason.split(' ').next().unwrap_or("special"));
                }
                named
            }
        })
        .collect();
    let Some(addr) = allowed.first() else {
        let reason = format!(
            "its server resolves to an address that needs the grant to name it ({}): add \
             `allow=ADDRESS` to the grant of `{}`",
            refused.join(", "),
            db.name
        );
        if let Ok(mut j) = journal.lock() {
            j.deny("database", db.name.clone(), reason.clone());
        }
        return Err(ToolError::AccessDenied(Denied {
            resource: db.name.clone(),
            reason,
        }));
    };
    pin(&mut config, addr.ip());
    config.connect_timeout(left.min(CONNECT_TIMEOUT));
    config.application_name("longhand");
    if db.mode == DatabaseMode::ReadOnly {
        let options = config.get_options().unwrap_or_default().to_owned();
        config.options(format!("{options} -c default_transaction_read_only=on").trim_start());
    }
    let tls = longhand_pgtls::connector(&mut config, &db.tls).map_err(|e| {
        ToolError::Failed(format!(
            "cannot connect to database `{}`: its TLS settings cannot be used ({})",
            db.name, e.0
        ))
    })?;
    let connecting = tokio::time::timeout(left.min(CONNECT_TIMEOUT), config.connect(tls)).await;
    let (client, connection) = match connecting {
        Err(_) => return Err(unreachable("its server did not answer in time")),
        Ok(Err(err)) => return Err(connect_error(db, &err)),
        Ok(Ok(pair)) => pair,
    };
    tokio::spawn(async move {
        // Ends when the client is dropped or the server goes away.
        let _ = connection.await;
    });
    // Read-only is the server's rule, and a superuser's read-only
    // transaction still runs `COPY … TO PROGRAM`, reads the server's files
    // and ends other sessions: refuse such a login unless the grant says
    // the operator meant it.
    if !db.superuser {
        let row = client
            .query_one("SELECT current_setting('is_superuser') = 'on'", &[])
            .await
            .map_err(|_| unreachable("its server did not answer a first question"))?;
        if row.get::<_, bool>(0) {
            let reason = format!(
                "the URL in {} logs in as a superuser, which read-only transactions do not \
                 contain (server files, programs, other sessions); grant a role without \
                 superuser, or add `superuser=yes` to the grant if that is meant",
                db.var
            );
            if let Ok(mut j) = journal.lock() {
                j.deny("database", db.name.clone(), reason.clone());
            }
            return Err(ToolError::AccessDenied(Denied {
                resource: db.name.clone(),
                reason,
            }));
        }
    }
    Ok(client)
}

/// Connect to `ip` whatever the name resolves to next (no rebinding
/// between the check and the connection); the name stays for TLS.
fn pin(config: &mut tokio_postgres::Config, ip: IpAddr) {
    config.hostaddr(ip);
}

/// A failed connection, told by kind: the driver's and the server's own
/// words can name the user, the database or the address.
fn connect_error(db: &DatabaseGrant, err: &tokio_postgres::Error) -> ToolError {
    let what = match err.as_db_error().map(|e| e.code().code()) {
        Some("28P01" | "28000") => format!(
            "the server refused the credentials in {} (SQLSTATE 28P01/28000): the operator \
             must fix the user or password there",
            db.var
        ),
        Some("3D000") => format!(
            "the database named in {} does not exist on its server (SQLSTATE 3D000)",
            db.var
        ),
        Some("53300") => "the server has no free connection slots (SQLSTATE 53300); try \
                          again later"
            .to_owned(),
        Some(code) => format!("the server refused the connection (SQLSTATE {code})"),
        None => {
            let text = err.to_string().to_ascii_lowercase();
            if text.contains("tls") || text.contains("certificate") || text.contains("ssl") {
                format!(
                    "the TLS handshake failed (sslmode={}); the operator must check the \
                     server's certificate and sslrootcert",
                    db.tls.mode.as_str()
                )
            } else if text.contains("refused") {
                "the server refused the connection (nothing listens at its address)".to_owned()
            } else {
                "the server could not be reached".to_owned()
            }
        }
    };
    tracing::warn!(database = %db.name, "{what}");
    ToolError::Failed(format!("cannot connect to database `{}`: {what}", db.name))
}

/// Why a statement did not run to its end.
enum RunError {
    /// The server refused or stopped the statement; the connection is
    /// fine once the transaction is rolled back.
    Statement(tokio_postgres::Error),
    /// Something about the statement the host refuses itself.
    Refused(ToolError),
    /// The connection is in doubt.
    Connection(tokio_postgres::Error),
}

impl RunError {
    fn is_statement(&self) -> bool {
        !matches!(self, RunError::Connection(_))
    }

    fn into_tool_error(self, db: &DatabaseGrant, redactor: &Option<Arc<Redactor>>) -> ToolError {
        let err = match self {
            RunError::Refused(e) => return e,
            RunError::Statement(e) | RunError::Connection(e) => e,
        };
        let Some(server) = err.as_db_error() else {
            return ToolError::Failed(format!(
                "the connection to database `{}` failed: {}",
                db.name,
                scrub(&err.to_string(), db, redactor)
            ));
        };
        let code = server.code().code();
        let mut message = scrub(server.message(), db, redactor);
        if let Some(detail) = server.detail() {
            message.push_str(&format!(" ({})", scrub(detail, db, redactor)));
        }
        if let Some(hint) = server.hint() {
            message.push_str(&format!(". Hint: {}", scrub(hint, db, redactor)));
        }
        let message = crate::bound::cut(message, 2048);
        match code {
            "25006" => ToolError::InvalidInput(format!(
                "database `{}` is read-only here: the server refused a write ({message}; \
                 SQLSTATE {code}). `query` only reads; a write needs `execute` on a database \
                 granted with mode=rw",
                db.name
            )),
            "57014" => ToolError::Failed(format!(
                "the statement ran past its time limit and the server cancelled it ({message}; \
                 SQLSTATE {code}); narrow it (WHERE, LIMIT) or ask the operator for a longer \
                 timeout"
            )),
            "42601" if message.contains("multiple commands") => ToolError::InvalidInput(format!(
                "one statement per call: the server refused more than one ({message}; SQLSTATE \
                 {code})"
            )),
            "42501" => ToolError::AccessDenied(Denied {
                resource: db.name.clone(),
                reason: format!("{message} (SQLSTATE {code})"),
            }),
            c if c.starts_with("08")
                || c.starts_with("53")
                || c.starts_with("57")
                || c.starts_with("58")
                || c.starts_with("XX") =>
            {
                ToolError::Failed(format!("{message} (SQLSTATE {code})"))
            }
            _ => ToolError::InvalidInput(format!("{message} (SQLSTATE {code})")),
        }
    }
}

impl From<tokio_postgres::Error> for RunError {
    fn from(err: tokio_postgres::Error) -> Self {
        if err.as_db_error().is_some() {
            RunError::Statement(err)
        } else {
            RunError::Connection(err)
        }
    }
}

/// Run `ask` on `client` inside its own transaction.
async fn on(
    client: &mut Client,
    db: &DatabaseGrant,
    ask: &Ask<'_>,
    grant: &SqlGrant,
    left: Duration,
) -> Result<Answer, RunError> {
    let timeout_ms = left.as_millis().clamp(1, i32::MAX as u128);
    let writes = matches!(ask, Ask::Execute { .. });
    let txn = client
        .build_transaction()
        .read_only(!writes)
        .start()
        .await?;
    // The snapshot is taken by this SELECT, so from here on the access
    // mode cannot change (`SET TRANSACTION READ WRITE` is too late).
    txn.batch_execute(&format!(
        "SELECT set_config('statement_timeout', '{timeout_ms}', true), \
         set_config('idle_in_transaction_session_timeout', '{timeout_ms}', true)"
    ))
    .await?;
    let answer = inside(&txn, ask, grant, db).await?;
    if writes {
        txn.commit().await?;
    } else {
        txn.rollback().await?;
    }
    Ok(answer)
}

async fn inside(
    txn: &Transaction<'_>,
    ask: &Ask<'_>,
    grant: &SqlGrant,
    db: &DatabaseGrant,
) -> Result<Answer, RunError> {
    match *ask {
        Ask::Query {
            statement,
            params,
            max_rows,
        } => {
            let prepared = txn.prepare(statement).await?;
            if prepared.columns().is_empty() {
                return Err(RunError::Refused(ToolError::InvalidInput(format!(
                    "`query` runs only statements that return rows (SELECT, VALUES, TABLE, \
                     WITH … SELECT, SHOW, EXPLAIN); the server describes this one as returning \
                     none, so it was not run. A write needs `execute` on a database granted \
                     with mode=rw (database `{}` is granted {})",
                    db.name,
                    if db.mode == DatabaseMode::ReadWrite {
                        "rw"
                    } else {
                        "read-only"
                    }
                ))));
            }
            for (i, column) in prepared.columns().iter().enumerate() {
                values::readable(column.type_()).map_err(|e| {
                    RunError::Refused(ToolError::InvalidInput(format!(
                        "column {} (`{}`): {}",
                        i + 1,
                        crate::bound::visible(column.name(), 64),
                        e.0
                    )))
                })?;
            }
            let bound = bind(&prepared, params)?;
            read_rows(txn, &prepared, &bound, max_rows, grant.max_bytes).await
        }
        Ask::Execute { statement, params } => {
            let prepared = txn.prepare(statement).await?;
            let bound = bind(&prepared, params)?;
            let changes = txn.execute_raw(&prepared, bound.iter()).await?;
            Ok(Answer::Changes(Changes { changes }))
        }
        Ask::Schema => schema_of(txn).await,
    }
}

fn bind<'a>(prepared: &Statement, params: &'a [Value]) -> Result<Vec<values::Param<'a>>, RunError> {
    let wanted = prepared.params().len();
    if params.len() != wanted {
        return Err(RunError::Refused(ToolError::InvalidInput(format!(
            "the statement has {wanted} parameter(s) ($1…) and {} value(s) were given in `params`",
            params.len()
        ))));
    }
    Ok(params.iter().map(values::Param).collect())
}

/// Fetch through a portal in batches: keep rows up to the caps, then count
/// the rest for a bounded while. The server computes only the batches
/// asked for.
async fn read_rows(
    txn: &Transaction<'_>,
    prepared: &Statement,
    params: &[values::Param<'_>],
    max_rows: u32,
    max_bytes: usize,
) -> Result<Answer, RunError> {
    let columns: Vec<Column> = prepared
        .columns()
        .iter()
        .map(|c| Column {
            name: c.name().to_owned(),
            type_: c.type_().name().to_owned(),
        })
        .collect();
    let portal = txn.bind_raw(prepared, params.iter()).await?;
    let mut rows: Vec<Vec<Value>> = Vec::new();
    let mut bytes = 0usize;
    let mut cut = 0u64;
    let mut full = false;
    let mut counting_since: Option<Instant> = None;
    // The first fetch asks for one row; each next one for as many rows as
    // fit in BATCH_BYTES at the mean size seen so far, so a result of huge
    // rows is never held a whole batch at a time.
    let mut ask = 1i32;
    loop {
        let batch = txn.query_portal(&portal, ask).await?;
        let done = batch.len() < ask as usize;
        let mut batch_bytes = 0usize;
        for row in &batch {
            let mut size = 0usize;
            for i in 0..row.len() {
                let raw: values::Raw<'_> = row.try_get(i)?;
                size += raw.0.map_or(0, <[u8]>::len) + VALUE_OVERHEAD;
            }
            batch_bytes += size;
            if full || rows.len() >= max_rows as usize || bytes + size > max_bytes {
                full = true;
                cut += 1;
                continue;
            }
            let mut values = Vec::with_capacity(row.len());
            for (i, column) in row.columns().iter().enumerate() {
                let raw: values::Raw<'_> = row.try_get(i)?;
                values.push(values::decode(column.type_(), raw.0).map_err(|e| {
                    RunError::Refused(ToolError::Failed(format!(
                        "column {} (`{}`) could not be read: {e}",
                        i + 1,
                        crate::bound::visible(column.name(), 64)
                    )))
                })?);
            }
            bytes += size;
            rows.push(values);
        }
        let mean = (batch_bytes / batch.len().max(1)).max(1);
        ask = i32::try_from((BATCH_BYTES / mean).clamp(1, BATCH as usize)).unwrap_or(BATCH);
        if done {
            return Ok(Answer::Rows(Rows {
                columns,
                rows,
                truncated_rows: cut,
                truncated_exact: true,
            }));
        }
        if full {
            let since = *counting_since.get_or_insert_with(Instant::now);
            if cut >= COUNT_ROWS || since.elapsed() >= COUNT_TIME {
                return Ok(Answer::Rows(Rows {
                    columns,
                    rows,
                    truncated_rows: cut,
                    truncated_exact: false,
                }));
            }
        }
    }
}

/// The tables and views the user can read, with columns and indexes.
async fn schema_of(txn: &Transaction<'_>) -> Result<Answer, RunError> {
    const COLUMNS: &str = "\
        SELECT n.nspname::text, c.relname::text, c.relkind::text, a.attname::text, \
               format_type(a.atttypid, a.atttypmod), NOT a.attnotnull, \
               pg_get_expr(d.adbin, d.adrelid) \
        FROM pg_catalog.pg_class c \
        JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
        JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped \
        LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum \
        WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') \
          AND n.nspname NOT IN ('pg_catalog', 'information_schema') \
          AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp%' \
          AND has_schema_privilege(n.oid, 'USAGE') \
          AND has_any_column_privilege(c.oid, 'SELECT') \
        ORDER BY 1, 2, a.attnum \
        LIMIT 20000";
    const INDEXES: &str = "\
        SELECT n.nspname::text, t.relname::text, i.relname::text, ix.indisunique, \
               (SELECT json_agg(pg_get_indexdef(ix.indexrelid, k, true) ORDER BY k)::text \
                FROM generate_series(1, ix.indnkeyatts) k) \
        FROM pg_catalog.pg_index ix \
        JOIN pg_catalog.pg_class i ON i.oid = ix.indexrelid \
        JOIN pg_catalog.pg_class t ON t.oid = ix.indrelid \
        JOIN pg_catalog.pg_namespace n ON n.oid = t.relnamespace \
        WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') \
          AND n.nspname NOT LIKE 'pg\\_toast%' \
          AND has_any_column_privilege(t.oid, 'SELECT') \
        ORDER BY 1, 2, 3 \
        LIMIT 5000";
    let mut tables: Vec<Table> = Vec::new();
    let mut at: HashMap<(String, String), usize> = HashMap::new();
    for row in txn.query(COLUMNS, &[]).await? {
        let (ns, name, kind): (String, String, String) = (row.get(0), row.get(1), row.get(2));
        let i = *at.entry((ns.clone(), name.clone())).or_insert_with(|| {
            tables.push(Table {
                namespace: ns,
                name,
                kind: match kind.as_str() {
                    "v" => "view",
                    "m" => "materialized-view",
                    "f" => "foreign-table",
                    _ => "table",
                }
                .to_owned(),
                columns: Vec::new(),
                indexes: Vec::new(),
            });
            tables.len() - 1
        });
        tables[i].columns.push(TableColumn {
            name: row.get(3),
            type_: row.get(4),
            nullable: row.get(5),
            default_value: row.get(6),
        });
    }
    for row in txn.query(INDEXES, &[]).await? {
        let key: (String, String) = (row.get(0), row.get(1));
        let Some(&i) = at.get(&key) else { continue };
        let columns: Option<String> = row.get(4);
        tables[i].indexes.push(Index {
            name: row.get(2),
            columns: columns
                .and_then(|c| serde_json::from_str(&c).ok())
                .unwrap_or_default(),
            unique: row.get(3),
        });
    }
    Ok(Answer::Tables(tables))
}

/// Idle connections to one database, each with when it went idle.
type Idle = Vec<(Client, Instant)>;

/// Connections kept for reuse, per database URL (its SHA-256).
struct Pool {
    idle: Mutex<HashMap<[u8; 32], Idle>>,
}

static POOL: std::sync::LazyLock<Pool> = std::sync::LazyLock::new(|| Pool {
    idle: Mutex::new(HashMap::new()),
});

fn key(db: &DatabaseGrant) -> [u8; 32] {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update(db.url.expose().as_bytes());
    h.update(db.mode.as_str().as_bytes());
    h.update(format!("{:?}", db.tls).as_bytes());
    h.finalize().into()
}

impl Pool {
    fn take(&self, db: &DatabaseGrant) -> Option<Client> {
        let mut idle = self.idle.lock().ok()?;
        let list = idle.get_mut(&key(db))?;
        while let Some((client, since)) = list.pop() {
            if !client.is_closed() && since.elapsed() < IDLE_FOR {
                return Some(client);
            }
        }
        None
    }

    /// Reset the session (`DISCARD ALL`) and keep it, off the call's path.
    fn give_back(&'static self, db: &DatabaseGrant, client: Client) {
        let key = key(db);
        tokio::spawn(async move {
            let reset = tokio::time::timeout(CONNECT_TIMEOUT, client.batch_execute("DISCARD ALL"));
            if !matches!(reset.await, Ok(Ok(()))) || client.is_closed() {
                return;
            }
            if let Ok(mut idle) = self.idle.lock() {
                let list = idle.entry(key).or_default();
                if list.len() < IDLE_PER_DATABASE {
                    list.push((client, Instant::now()));
                }
            }
        });
    }
}
