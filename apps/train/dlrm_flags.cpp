#include "apps/train/dlrm_flags.h"

#include "apps/cli_options.h"

namespace frugal::cli {

using run::DlrmArgs;

void add_dlrm_options(CLI::App* cmd, DlrmArgs& a) {
  add_choice(cmd, "--ids", a.ids,
             {layers::IdMode::full, layers::IdMode::hash, layers::IdMode::freq_double, layers::IdMode::qr},
             "--model dlrm: embedding rows of the categorical ids: full (a row per id seen --min-id-count times), "
             "hash (--hash-rows per field), freq-double (frequent ids own rows, rare ones double-hashed) or qr "
             "(quotient x remainder tables); freq-double and qr keep 1/--id-compression of full's rows");
  cmd->add_option("--embedding-dim", a.embedding_dim, "--model dlrm: embedding dimension (and the bottom MLP's output)")
      ->capture_default_str()->check(cli::positive());
  cmd->add_option("--bottom", a.bottom, "--model dlrm: hidden widths of the bottom (dense-feature) MLP, e.g. 64 or "
                                        "256,64; none: one layer")->capture_default_str();
  cmd->add_option("--top", a.top, "--model dlrm: hidden widths of the top MLP before its click logit")
      ->capture_default_str();
  cmd->add_option("--min-id-count", a.min_id_count, "--model dlrm: ids seen fewer times in the training data share "
                                                     "one row (--ids full, freq-double, qr)")
      ->capture_default_str()->check(cli::positive());
  cmd->add_option("--hash-rows", a.hash_rows, "--model dlrm --ids hash: rows per field")
      ->capture_default_str()->check(cli::in_range(size_t{1}, size_t{1} << 31));
  cmd->add_option("--id-compression", a.id_compression, "--model dlrm --ids freq-double|qr: full-mode rows per row "
                                                         "kept in a large field")
      ->capture_default_str()->check(cli::in_range(1.0, 1e6));
  add_choice(cmd, "--qr-combine", a.qr_combine, {layers::Combine::sum, layers::Combine::product},
             "--model dlrm --ids qr: the quotient and remainder rows added or multiplied element-wise");
  add_choice(cmd, "--table-exchange", a.table_exchange, {layers::TableMode::ps, layers::TableMode::des},
             "--model dlrm on several ranks, tables sliced by rows: ps (each rank pulls the rows its samples use "
             "from their owners and pushes their gradients back; the fewest bytes with one id per field) or des "
             "(partial lookups of every sample summed over the ranks: ids cross the network, weights never); "
             "--parallel data replicates the tables instead");
}

}  // namespace frugal::cli
