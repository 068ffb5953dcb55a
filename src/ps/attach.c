/* attach: give a node the parameter-server part of its role. */
#include "ps/ps.h"

int ps_attach(loom_node *n)
{
    switch (loom_node_role(n)) {
    case LOOM_SCHEDULER:
        return ps_registry_attach(n);
    case LOOM_SERVER:
        return ps_server_attach(n);
    default:
        return ps_client_attach(n);
    }
}
