//! Caffe's `upgrade_net_proto_text`, `upgrade_net_proto_binary` and
//! `upgrade_solver_proto_text`: a file of an old format rewritten in
//! today's.

use std::path::PathBuf;

use blobflow::proto::{ParamMessage, TextMessage};

use crate::log::Log;

type Failure = Box<dyn std::error::Error>;

/// What an upgrade is asked to do.
#[derive(clap::Args)]
pub struct UpgradeArgs {
    /// The net to read
    input: PathBuf,
    /// The upgraded net to write
    output: PathBuf,
}

fn proto_error(path: &std::path::Path) -> impl Fn(blobflow::proto::ProtoError) -> Failure + '_ {
    move |source| {
        Box::new(blobflow::BlobError::Proto {
            path: path.display().to_string(),
            source,
        })
    }
}

/// A text-format message of `schema` from the file at `path`.
fn read_text_message(
    path: &std::path::Path,
    schema: &'static blobflow::proto::schema::MessageSchema,
) -> Result<ParamMessage, Failure> {
    let text = blobflow::runtime::read_text_file(path)?;
    let tree = TextMessage::parse(&text).map_err(proto_error(path))?;
    ParamMessage::from_text(schema, &tree).map_err(proto_error(path))
}

/// `upgrade_net_proto_text IN OUT`.
pub fn text(args: &UpgradeArgs) -> Result<(), Failure> {
    let mut log = Log::new("upgrade_net_proto_text", None);
    let net = read_text_message(&args.input, crate::schemas().net_parameter())?;
    let upgraded = blobflow::layers::net::upgrade_net(&net)?;
    report(&mut log, &net, &upgraded, &args.input);
    blobflow::runtime::write_atomically(&args.output, upgraded.to_text().as_bytes())?;
    log.info(&format!(
        "Wrote upgraded NetParameter text proto to {}",
        args.output.display()
    ));
    Ok(())
}

/// `upgrade_net_proto_binary IN OUT` (a `.caffemodel` too).
pub fn binary(args: &UpgradeArgs) -> Result<(), Failure> {
    let mut log = Log::new("upgrade_net_proto_binary", None);
    let bytes = blobflow::runtime::read_file(&args.input)?;
    let net = ParamMessage::decode(crate::schemas().net_parameter(), &bytes)
        .map_err(proto_error(&args.input))?;
    let upgraded = blobflow::layers::net::upgrade_net(&net)?;
    report(&mut log, &net, &upgraded, &args.input);
    blobflow::runtime::write_atomically(&args.output, &upgraded.encode_to_vec())?;
    log.info(&format!(
        "Wrote upgraded NetParameter binary proto to {}",
        args.output.display()
    ));
    Ok(())
}

/// `upgrade_solver_proto_text IN OUT`.
pub fn solver_text(args: &UpgradeArgs) -> Result<(), Failure> {
    let mut log = Log::new("upgrade_solver_proto_text", None);
    let solver = read_text_message(&args.input, crate::schemas().solver_parameter())?;
    let upgraded = match blobflow::layers::solver::upgrade_solver(&solver)? {
        Some(new) => {
            log.info(&format!(
                "Successfully upgraded file specified using deprecated solver_type: {}",
                args.input.display()
            ));
            new
        }
        None => {
            log.info(&format!(
                "File already in latest proto format: {}",
                args.input.display()
            ));
            solver
        }
    };
    blobflow::runtime::write_atomically(&args.output, upgraded.to_text().as_bytes())?;
    log.info(&format!(
        "Wrote upgraded SolverParameter text proto to {}",
        args.output.display()
    ));
    Ok(())
}

/// Caffe's words on what the upgrade did.
fn report(log: &mut Log, before: &ParamMessage, after: &ParamMessage, input: &std::path::Path) {
    if before.encode_to_vec() == after.encode_to_vec() {
        log.info(&format!(
            "File already in latest proto format: {}",
            input.display()
        ));
    } else {
        log.info(&format!(
            "Successfully upgraded file specified using deprecated fields: {}",
            input.display()
        ));
        log.info(
            "Note that future Caffe releases will not support deprecated fields; \
             the file written has none",
        );
    }
}
