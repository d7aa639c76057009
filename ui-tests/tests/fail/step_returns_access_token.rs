// A step never returns the `AccessToken` that `get_token` gives it: step results are written to
// the journal, so the token is used inside the step and only what it fetched is returned. The
// macro refuses the type by name, and a renamed token is still refused: it is not `Serialize`.

use eve_tools::prelude::*;
use eve_tools::AccessToken;

const GITHUB: Provider = Provider::new("github");

#[step]
async fn sign_in(ctx: &StepCtx) -> Result<AccessToken, StepError> {
    ctx.get_token(&GITHUB).await
}

type Credential = AccessToken;

#[step]
async fn sign_in_again(ctx: &StepCtx) -> Result<Credential, StepError> {
    ctx.get_token(&GITHUB).await
}

fn main() {}
