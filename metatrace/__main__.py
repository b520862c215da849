import sys
import warnings

warnings.filterwarnings("ignore", message="transformer_engine module not found")

from metatrace.codegen.report import main  # noqa: E402

sys.exit(main())
