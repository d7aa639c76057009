//! Running a statement through the connection's statement cache: each SQL text is parsed once per
//! connection, then only bound and executed.

use deadpool_postgres::GenericClient;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

/// The parameters of one statement.
pub(super) type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

/// Runs `sql` and returns how many rows it changed.
pub(super) async fn execute<C: GenericClient>(
    conn: &C,
    sql: &str,
    params: Params<'_>,
) -> Result<u64, tokio_postgres::Error> {
    let statement = conn.prepare_cached(sql).await?;
    conn.execute(&statement, params).await
}

/// Runs `sql` and returns its rows.
pub(super) async fn query<C: GenericClient>(
    conn: &C,
    sql: &str,
    params: Params<'_>,
) -> Result<Vec<Row>, tokio_postgres::Error> {
    let statement = conn.prepare_cached(sql).await?;
    conn.query(&statement, params).await
}

/// Runs `sql` and returns its one row, if any (more than one is an error).
pub(super) async fn query_opt<C: GenericClient>(
    conn: &C,
    sql: &str,
    params: Params<'_>,
) -> Result<Option<Row>, tokio_postgres::Error> {
    let statement = conn.prepare_cached(sql).await?;
    conn.query_opt(&statement, params).await
}

/// Runs `sql` and returns its one row (none or more than one is an error).
pub(super) async fn query_one<C: GenericClient>(
    conn: &C,
    sql: &str,
    params: Params<'_>,
) -> Result<Row, tokio_postgres::Error> {
    let statement = conn.prepare_cached(sql).await?;
    conn.query_one(&statement, params).await
}
