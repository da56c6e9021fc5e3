# lit configuration of Castor's FileCheck tests.
import os
import lit.formats

config.name = "Castor"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.excludes = ["lit.cfg.py", "lit.site.cfg.py", "Inputs", "fixtures"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.castor_obj_root, "test")

config.environment["PATH"] = os.pathsep.join(
    [config.castor_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", os.environ["PATH"])])
config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(("%models", os.path.join(config.castor_src_root, "models")))
config.substitutions.append(("%bin", config.castor_tools_dir))
config.substitutions.append(("%reference", os.path.join(config.castor_src_root, "test", "reference")))
config.substitutions.append(("%fixtures", os.path.join(config.castor_src_root, "test", "fixtures")))
