package assemble

import ()
