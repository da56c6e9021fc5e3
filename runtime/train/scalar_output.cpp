#include "train/scalar_output.h"

#include "weights/init.h"

namespace castor::train {

Expected<double> scalarOutput(Session &session, const std::string &name) {
  auto t = session.output(name);
  if (!t)
    return t.status();
  if (t->data.empty())
    return Status::error("the plan's output \"" + name + "\" is empty");
  return weights::decodeValues(t->dtype, t->data)[0];
}

} // namespace castor::train
